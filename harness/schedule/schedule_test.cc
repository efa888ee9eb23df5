// File: harness/schedule/schedule_test.cc
//
// Golden values of the schedules: the per-rank orders and tables of spec §4.3-4.5 (hand-expanded
// from the spec's compact notation), warm-up counts, phases, names and validate() errors.
#include "harness/schedule/schedule.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mtp::schedule {
namespace {

ScheduleConfig interleaved(int p, int v, int m, int n) {
  return ScheduleConfig{ScheduleKind::kInterleaved, p, v, m, n};
}
ScheduleConfig one_f_one_b(int p, int m) {
  return ScheduleConfig{ScheduleKind::kOneFOneB, p, 1, m, 0};
}

std::string order(const ScheduleConfig& config, int rank) {
  return format_ops(rank_ops(config, rank));
}

// Expects validate(config) to throw ScheduleError with exactly `message`.
void expect_invalid(const ScheduleConfig& config, const std::string& message) {
  try {
    validate(config);
    ADD_FAILURE() << "validate() accepted a config that should fail with: " << message;
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.what(), message);
  }
}

TEST(ScheduleKindTest, ParsesAndNamesEveryKind) {
  for (ScheduleKind kind :
       {ScheduleKind::kNoPipelining, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    EXPECT_EQ(parse_schedule_kind(schedule_kind_name(kind)), kind);
  }
  EXPECT_EQ(schedule_kind_name(ScheduleKind::kNoPipelining), "none");
  EXPECT_EQ(schedule_kind_name(ScheduleKind::kOneFOneB), "1f1b");
  EXPECT_EQ(schedule_kind_name(ScheduleKind::kInterleaved), "interleaved");
  try {
    parse_schedule_kind("1F1B");
    ADD_FAILURE() << "parse_schedule_kind accepted \"1F1B\"";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown schedule kind \"1F1B\": expected one of \"none\", \"1f1b\", "
              "\"interleaved\", \"combined_1f1b\"");
  }
}

// Spec §4.5 example (sched.py:1223-1242): P2 N3 M5 V2.
TEST(InterleavedTableTest, SpecExampleP2N3M5V2) {
  const auto table = interleaved_table(interleaved(2, 2, 5, 3));
  std::vector<int> mbs, chunks;
  for (const TableEntry& e : table) {
    mbs.push_back(e.microbatch);
    chunks.push_back(e.chunk);
  }
  EXPECT_EQ(mbs, (std::vector<int>{0, 1, 2, 0, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(chunks, (std::vector<int>{0, 0, 0, 1, 1, 1, 0, 0, 1, 1}));
}

TEST(InterleavedTableTest, DefaultGroupSizeIsP) {
  const auto table = interleaved_table(interleaved(2, 3, 4, 0));
  std::vector<int> mbs, chunks;
  for (const TableEntry& e : table) {
    mbs.push_back(e.microbatch);
    chunks.push_back(e.chunk);
  }
  EXPECT_EQ(mbs, (std::vector<int>{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3}));
  EXPECT_EQ(chunks, (std::vector<int>{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2}));
}

TEST(WarmupTest, InterleavedFormulaAndCap) {
  const auto p4 = interleaved(4, 2, 8, 4);  // 2(P−r−1) + (V−1)·N
  EXPECT_EQ(warmup_steps(p4, 0), 10);
  EXPECT_EQ(warmup_steps(p4, 1), 8);
  EXPECT_EQ(warmup_steps(p4, 2), 6);
  EXPECT_EQ(warmup_steps(p4, 3), 4);
  const auto p2 = interleaved(2, 2, 4, 2);
  EXPECT_EQ(warmup_steps(p2, 0), 4);
  EXPECT_EQ(warmup_steps(p2, 1), 2);
  const auto p2n3 = interleaved(2, 2, 5, 3);
  EXPECT_EQ(warmup_steps(p2n3, 0), 5);
  EXPECT_EQ(warmup_steps(p2n3, 1), 3);
  // Capped at T = M·V: P4 V2 M4 N4 has T = 8 < 10.
  const auto capped = interleaved(4, 2, 4, 4);
  EXPECT_EQ(warmup_steps(capped, 0), 8);
  EXPECT_EQ(warmup_steps(capped, 1), 8);
  EXPECT_EQ(warmup_steps(capped, 2), 6);
  EXPECT_EQ(warmup_steps(capped, 3), 4);
}

TEST(WarmupTest, OneFOneBAndNoPipelining) {
  const auto p4 = one_f_one_b(4, 8);  // min(P−r−1, M)
  EXPECT_EQ(warmup_steps(p4, 0), 3);
  EXPECT_EQ(warmup_steps(p4, 1), 2);
  EXPECT_EQ(warmup_steps(p4, 2), 1);
  EXPECT_EQ(warmup_steps(p4, 3), 0);
  EXPECT_EQ(warmup_steps(one_f_one_b(4, 2), 0), 2);
  EXPECT_EQ(warmup_steps(ScheduleConfig{ScheduleKind::kNoPipelining, 1, 1, 4, 0}, 0), 0);
}

// Spec §4.5 table, P4 V2 M8 N4, every rank ("F0.0-3" expanded by hand).
TEST(InterleavedOrderTest, SpecP4V2M8N4) {
  const auto config = interleaved(4, 2, 8, 4);
  EXPECT_EQ(
      order(config, 0),
      "F0.0 F0.1 F0.2 F0.3 F1.0 F1.1 F1.2 F1.3 F0.4 F0.5 (F0.6 B1.0) (F0.7 B1.1) (F1.4 B1.2) "
      "(F1.5 B1.3) (F1.6 B0.0) (F1.7 B0.1) B0.2 B0.3 B1.4 B1.5 B1.6 B1.7 B0.4 B0.5 B0.6 B0.7");
  EXPECT_EQ(order(config, 1),
            "F0.0 F0.1 F0.2 F0.3 F1.0 F1.1 F1.2 F1.3 (F0.4 B1.0) (F0.5 B1.1) (F0.6 B1.2) "
            "(F0.7 B1.3) (F1.4 B0.0) (F1.5 B0.1) (F1.6 B0.2) (F1.7 B0.3) B1.4 B1.5 B1.6 B1.7 B0.4 "
            "B0.5 B0.6 B0.7");
  EXPECT_EQ(order(config, 2),
            "F0.0 F0.1 F0.2 F0.3 F1.0 F1.1 (F1.2 B1.0) (F1.3 B1.1) (F0.4 B1.2) (F0.5 B1.3) "
            "(F0.6 B0.0) (F0.7 B0.1) (F1.4 B0.2) (F1.5 B0.3) (F1.6 B1.4) (F1.7 B1.5) B1.6 B1.7 "
            "B0.4 B0.5 B0.6 B0.7");
  EXPECT_EQ(order(config, 3),
            "F0.0 F0.1 F0.2 F0.3 (F1.0 B1.0) (F1.1 B1.1) (F1.2 B1.2) (F1.3 B1.3) (F0.4 B0.0) "
            "(F0.5 B0.1) (F0.6 B0.2) (F0.7 B0.3) (F1.4 B1.4) (F1.5 B1.5) (F1.6 B1.6) (F1.7 B1.7) "
            "B0.4 B0.5 B0.6 B0.7");
}

// Spec §4.5, P2 V2 M4 N2, both ranks (rank 1 is also the header's example).
TEST(InterleavedOrderTest, SpecP2V2M4N2) {
  const auto config = interleaved(2, 2, 4, 2);
  EXPECT_EQ(order(config, 0),
            "F0.0 F0.1 F1.0 F1.1 (F0.2 B1.0) (F0.3 B1.1) (F1.2 B0.0) (F1.3 B0.1) B1.2 B1.3 B0.2 "
            "B0.3");
  EXPECT_EQ(order(config, 1),
            "F0.0 F0.1 (F1.0 B1.0) (F1.1 B1.1) (F0.2 B0.0) (F0.3 B0.1) (F1.2 B1.2) (F1.3 B1.3) "
            "B0.2 B0.3");
}

// Remainder group (N=3, M=5): table of the spec example, W = 5 and 3.
TEST(InterleavedOrderTest, RemainderGroupP2V2M5N3) {
  const auto config = interleaved(2, 2, 5, 3);
  EXPECT_EQ(order(config, 0),
            "F0.0 F0.1 F0.2 F1.0 F1.1 (F1.2 B1.0) (F0.3 B1.1) (F0.4 B1.2) (F1.3 B0.0) (F1.4 B0.1) "
            "B0.2 B1.3 B1.4 B0.3 B0.4");
  EXPECT_EQ(order(config, 1),
            "F0.0 F0.1 F0.2 (F1.0 B1.0) (F1.1 B1.1) (F1.2 B1.2) (F0.3 B0.0) (F0.4 B0.1) "
            "(F1.3 B0.2) (F1.4 B1.3) B1.4 B0.3 B0.4");
}

// W capped at T: everything is warm-up then cool-down, no steady pairs.
TEST(InterleavedOrderTest, AllWarmupWhenCapped) {
  const auto ops = rank_ops(interleaved(4, 2, 4, 4), 0);
  EXPECT_EQ(format_ops(ops),
            "F0.0 F0.1 F0.2 F0.3 F1.0 F1.1 F1.2 F1.3 B1.0 B1.1 B1.2 B1.3 B0.0 B0.1 B0.2 B0.3");
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].phase, i < 8 ? Phase::kWarmup : Phase::kCooldown) << "op " << i;
  }
}

TEST(InterleavedOrderTest, PhasesAndFields) {
  const auto ops = rank_ops(interleaved(2, 2, 4, 2), 0);
  ASSERT_EQ(ops.size(), 16u);
  EXPECT_EQ(ops[0], (Op{OpType::kForward, 0, 0, Phase::kWarmup}));
  EXPECT_EQ(ops[3], (Op{OpType::kForward, 1, 1, Phase::kWarmup}));
  EXPECT_EQ(ops[4], (Op{OpType::kForward, 0, 2, Phase::kSteady}));
  EXPECT_EQ(ops[5], (Op{OpType::kBackward, 1, 0, Phase::kSteady}));
  EXPECT_EQ(ops[11], (Op{OpType::kBackward, 0, 1, Phase::kSteady}));
  EXPECT_EQ(ops[12], (Op{OpType::kBackward, 1, 2, Phase::kCooldown}));
  EXPECT_EQ(ops[15], (Op{OpType::kBackward, 0, 3, Phase::kCooldown}));
}

// Spec §4.4, P4 M8, every rank.
TEST(OneFOneBOrderTest, P4M8EveryRank) {
  const auto config = one_f_one_b(4, 8);
  EXPECT_EQ(order(config, 0),
            "F0.0 F0.1 F0.2 (F0.3 B0.0) (F0.4 B0.1) (F0.5 B0.2) (F0.6 B0.3) (F0.7 B0.4) B0.5 B0.6 "
            "B0.7");
  EXPECT_EQ(order(config, 1),
            "F0.0 F0.1 (F0.2 B0.0) (F0.3 B0.1) (F0.4 B0.2) (F0.5 B0.3) (F0.6 B0.4) (F0.7 B0.5) "
            "B0.6 B0.7");
  EXPECT_EQ(order(config, 2),
            "F0.0 (F0.1 B0.0) (F0.2 B0.1) (F0.3 B0.2) (F0.4 B0.3) (F0.5 B0.4) (F0.6 B0.5) "
            "(F0.7 B0.6) B0.7");
  EXPECT_EQ(order(config, 3),
            "(F0.0 B0.0) (F0.1 B0.1) (F0.2 B0.2) (F0.3 B0.3) (F0.4 B0.4) (F0.5 B0.5) (F0.6 B0.6) "
            "(F0.7 B0.7)");
}

TEST(OneFOneBOrderTest, P2) {
  const auto config = one_f_one_b(2, 4);
  EXPECT_EQ(order(config, 0), "F0.0 (F0.1 B0.0) (F0.2 B0.1) (F0.3 B0.2) B0.3");
  EXPECT_EQ(order(config, 1), "(F0.0 B0.0) (F0.1 B0.1) (F0.2 B0.2) (F0.3 B0.3)");
}

TEST(OneFOneBOrderTest, WarmupCappedAtM) {
  const auto ops = rank_ops(one_f_one_b(4, 2), 0);
  EXPECT_EQ(format_ops(ops), "F0.0 F0.1 B0.0 B0.1");
  EXPECT_EQ(ops[1].phase, Phase::kWarmup);
  EXPECT_EQ(ops[2].phase, Phase::kCooldown);
  EXPECT_EQ(order(one_f_one_b(4, 2), 3), "(F0.0 B0.0) (F0.1 B0.1)");
}

// Spec §4.3: F(mb) then B(mb); every op is tagged kSteady.
TEST(NoPipeliningOrderTest, ForwardThenBackwardPerMicrobatch) {
  const ScheduleConfig config{ScheduleKind::kNoPipelining, 1, 1, 3, 0};
  const auto ops = rank_ops(config, 0);
  EXPECT_EQ(format_ops(ops), "(F0.0 B0.0) (F0.1 B0.1) (F0.2 B0.2)");
  for (const Op& op : ops) {
    EXPECT_EQ(op.phase, Phase::kSteady);
  }
}

TEST(FormatOpsTest, PairsOnlySteadyForwardThenSteadyBackward) {
  EXPECT_EQ(format_ops({}), "");
  EXPECT_EQ(format_ops({Op{OpType::kForward, 1, 12, Phase::kSteady}}), "F1.12");
  EXPECT_EQ(
      format_ops(
          {Op{OpType::kBackward, 0, 2, Phase::kSteady}, Op{OpType::kForward, 0, 6, Phase::kSteady},
           Op{OpType::kBackward, 1, 0, Phase::kSteady}, Op{OpType::kForward, 0, 7, Phase::kSteady},
           Op{OpType::kBackward, 1, 1, Phase::kCooldown}}),
      "B0.2 (F0.6 B1.0) F0.7 B1.1");
}

TEST(ValidateTest, AcceptsLegalConfigs) {
  EXPECT_NO_THROW(validate(ScheduleConfig{ScheduleKind::kNoPipelining, 1, 1, 1, 0}));
  EXPECT_NO_THROW(validate(one_f_one_b(2, 1)));
  EXPECT_NO_THROW(validate(interleaved(4, 2, 8, 0)));  // N defaults to P
  EXPECT_NO_THROW(validate(interleaved(2, 2, 5, 3)));  // remainder 2 >= P
  EXPECT_NO_THROW(validate(interleaved(4, 2, 8, 8)));  // N = M
  EXPECT_NO_THROW(validate(interleaved(2, 1, 4, 2)));  // V = 1 is allowed for interleaved
}

TEST(ValidateTest, RejectsBrokenRulesWithExactMessages) {
  expect_invalid(interleaved(4, 2, 8, 3),
                 "interleaved schedule: microbatch group size N=3 must satisfy P <= N <= M "
                 "(P=4, M=8)");
  expect_invalid(interleaved(4, 2, 8, 9),
                 "interleaved schedule: microbatch group size N=9 must satisfy P <= N <= M "
                 "(P=4, M=8)");
  expect_invalid(interleaved(4, 2, 2, 0),
                 "interleaved schedule: microbatch group size N=4 must satisfy P <= N <= M "
                 "(P=4, M=2)");
  expect_invalid(interleaved(4, 2, 10, 4),
                 "interleaved schedule: the last microbatch group M mod N=2 must be 0 or >= P "
                 "(M=10, N=4, P=4)");
  expect_invalid(interleaved(1, 2, 4, 1),
                 "interleaved schedule: interleaved 1F1B needs P > 1 (P=1); use \"none\" for P=1");
  expect_invalid(interleaved(0, 2, 4, 0), "interleaved schedule: pipeline size P=0 must be >= 1");
  expect_invalid(interleaved(2, 0, 4, 0),
                 "interleaved schedule: virtual pipeline size V=0 must be >= 1");
  expect_invalid(interleaved(2, 2, 0, 0),
                 "interleaved schedule: number of microbatches M=0 must be >= 1");
  expect_invalid(ScheduleConfig{ScheduleKind::kNoPipelining, 2, 1, 4, 0},
                 "none schedule: no pipelining needs P=1 and V=1 (P=2, V=1)");
  expect_invalid(ScheduleConfig{ScheduleKind::kNoPipelining, 1, 2, 4, 0},
                 "none schedule: no pipelining needs P=1 and V=1 (P=1, V=2)");
  expect_invalid(ScheduleConfig{ScheduleKind::kOneFOneB, 2, 2, 4, 0},
                 "1f1b schedule: non-interleaved 1F1B needs V=1 (V=2); use \"interleaved\"");
  expect_invalid(one_f_one_b(1, 4), "1f1b schedule: 1F1B needs P > 1 (P=1); use \"none\" for P=1");
}

TEST(ValidateTest, EveryEntryPointValidates) {
  const auto bad = interleaved(4, 2, 8, 3);
  EXPECT_THROW(rank_ops(bad, 0), ScheduleError);
  EXPECT_THROW(warmup_steps(bad, 0), ScheduleError);
  EXPECT_THROW(interleaved_table(bad), ScheduleError);
  try {
    rank_ops(interleaved(2, 2, 4, 2), 2);
    ADD_FAILURE() << "rank_ops accepted rank 2 of P=2";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(std::string(e.what()), "interleaved schedule: rank 2 is outside [0, P) (P=2)");
  }
  EXPECT_THROW(warmup_steps(one_f_one_b(2, 4), -1), ScheduleError);
}

}  // namespace
}  // namespace mtp::schedule
