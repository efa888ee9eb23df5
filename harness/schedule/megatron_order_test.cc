// Every rank's op order of 1F1B, interleaved 1F1B and combined 1F1B (Megatron's EP A2A overlap,
// one op of each pair listed forward first), for P = 2..8, V = 1..4 and M = 1..32 (N = P),
// against the order Megatron-LM's own schedules.py runs (golden/schedules/megatron_op_order.txt,
// made by ci/megatron_schedule_order/generate.py, which runs Megatron's schedule functions with
// recording forward and backward steps): the same ops in the same order on every rank, and the
// same configurations refused. An op-order change that keeps first-in-first-out per chunk changes
// no value, so before this table only an executor abort at some layouts would have seen it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "harness/schedule/schedule.h"

namespace mtp::schedule {
namespace {

/// "F0.0 F0.1 (F1.0 B1.0) B0.1" → "F0.0 F0.1 F1.0 B1.0 B0.1": the order, not the phase grouping.
std::string plain(const std::string& ops) {
  std::string out;
  for (char c : ops) {
    if (c != '(' && c != ')') out += c;
  }
  return out;
}

TEST(MegatronOrderTest, EveryRankRunsMegatronsOrderAndTheSameConfigurationsAreRefused) {
  std::ifstream in(std::string(MTP_SOURCE_DIR) + "/golden/schedules/megatron_op_order.txt");
  ASSERT_TRUE(in) << "golden/schedules/megatron_op_order.txt";
  std::string line;
  int checked = 0, refused = 0, differ = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // "<kind> P=<P> V=<V> M=<M> rank=<r>: <ops or refused: …>"
    const size_t colon = line.find(": ");
    ASSERT_NE(colon, std::string::npos) << line;
    std::istringstream head(line.substr(0, colon));
    std::string kind, p, v, m, r;
    head >> kind >> p >> v >> m >> r;
    ScheduleConfig config;
    config.kind = kind == "1f1b"            ? ScheduleKind::kOneFOneB
                  : kind == "combined_1f1b" ? ScheduleKind::kCombined1F1B
                                            : ScheduleKind::kInterleaved;
    config.pipeline_size = std::stoi(p.substr(2));
    config.virtual_size = std::stoi(v.substr(2));
    config.num_microbatches = std::stoi(m.substr(2));
    const int rank = std::stoi(r.substr(5));
    const std::string want = line.substr(colon + 2);
    ++checked;
    if (want.rfind("refused:", 0) == 0) {
      ++refused;
      EXPECT_THROW(validate(config), ScheduleError) << line;
      continue;
    }
    std::string got;
    try {
      got = plain(format_ops(rank_ops(config, rank)));
    } catch (const ScheduleError& e) {
      got = std::string("refused by the harness: ") + e.what();
    }
    if (got != want && ++differ <= 5) {
      ADD_FAILURE() << line.substr(0, colon) << "\n  Megatron: " << want << "\n  harness:  " << got;
    }
  }
  EXPECT_EQ(differ, 0);
  EXPECT_EQ(checked, 8960);  // every (schedule, P, V, M, rank) of the table
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace mtp::schedule
