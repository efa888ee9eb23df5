#include "harness/schedule/pattern.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

namespace mtp::schedule::detail {

int group_size(const ScheduleConfig& config) {
  return config.microbatch_group_size == 0 ? config.pipeline_size : config.microbatch_group_size;
}

std::vector<TableEntry> make_table(int num_microbatches, int num_chunks, int n) {
  std::vector<TableEntry> table;
  table.reserve(static_cast<size_t>(num_microbatches) * num_chunks);
  for (int first = 0; first < num_microbatches; first += n) {
    const int last = std::min(first + n, num_microbatches);
    for (int chunk = 0; chunk < num_chunks; ++chunk) {
      for (int mb = first; mb < last; ++mb) {
        table.push_back(TableEntry{mb, chunk});
      }
    }
  }
  return table;
}

std::vector<Op> one_f_one_b(const std::vector<TableEntry>& table, int num_chunks, int warmup) {
  const int total = static_cast<int>(table.size());
  std::vector<std::deque<int>> stored(num_chunks);  // forwarded, not yet backwarded, per chunk
  std::vector<Op> ops;
  ops.reserve(2 * table.size());
  auto forward = [&](int k, Phase phase) {
    const TableEntry& e = table[k];
    stored[e.chunk].push_back(e.microbatch);
    ops.push_back(Op{OpType::kForward, e.chunk, e.microbatch, phase});
  };
  auto backward = [&](int k, Phase phase) {
    const int chunk = num_chunks - 1 - table[k].chunk;
    MTP_INTERNAL_ASSERT(
        !stored[chunk].empty(),
        fmt::format("backward step {} of chunk {} has no stored forward", k, chunk));
    const int mb = stored[chunk].front();
    stored[chunk].pop_front();
    MTP_INTERNAL_ASSERT(mb == table[k].microbatch,
                        fmt::format("backward step {}: FIFO microbatch {} != table microbatch {}",
                                    k, mb, table[k].microbatch));
    ops.push_back(Op{OpType::kBackward, chunk, mb, phase});
  };
  for (int k = 0; k < warmup; ++k) {
    forward(k, Phase::kWarmup);
  }
  for (int k = 0; k < total - warmup; ++k) {
    forward(k + warmup, Phase::kSteady);
    backward(k, Phase::kSteady);
  }
  for (int k = total - warmup; k < total; ++k) {
    backward(k, Phase::kCooldown);
  }
  return ops;
}

void check_interleaved(const ScheduleConfig& config) {
  const std::string kind = schedule_kind_name(config.kind);
  const int p = config.pipeline_size, m = config.num_microbatches;
  if (p < 2) {
    throw ScheduleError(fmt::format(
        "{} schedule: interleaved 1F1B needs P > 1 (P={}); use \"none\" for P=1", kind, p));
  }
  const int n = group_size(config);
  if (n < p || n > m) {
    throw ScheduleError(
        fmt::format("{} schedule: microbatch group size N={} must satisfy P <= N <= M "
                    "(P={}, M={})",
                    kind, n, p, m));
  }
  const int remainder = m % n;
  if (remainder != 0 && remainder < p) {
    throw ScheduleError(
        fmt::format("{} schedule: the last microbatch group M mod N={} must be 0 or >= P "
                    "(M={}, N={}, P={})",
                    kind, remainder, m, n, p));
  }
}

int interleaved_warmup(const ScheduleConfig& config, int rank) {
  const int p = config.pipeline_size, v = config.virtual_size;
  return std::min(2 * (p - rank - 1) + (v - 1) * group_size(config), config.num_microbatches * v);
}

}  // namespace mtp::schedule::detail
