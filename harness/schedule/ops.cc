// File: harness/schedule/ops.cc
//
// Warm-up counts, the interleaved schedule table and the per-rank op lists of the three
// schedules (spec §4.3-4.5; Megatron-LM schedules.py forward_backward_no_pipelining,
// forward_backward_pipelining_without_interleaving, forward_backward_pipelining_with_interleaving).
#include "harness/schedule/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

namespace mtp::schedule {
namespace {

void check_rank(const ScheduleConfig& config, int rank) {
  if (rank < 0 || rank >= config.pipeline_size) {
    throw ScheduleError(fmt::format("{} schedule: rank {} is outside [0, P) (P={})",
                                    schedule_kind_name(config.kind), rank, config.pipeline_size));
  }
}

int group_size(const ScheduleConfig& config) {
  return config.microbatch_group_size == 0 ? config.pipeline_size : config.microbatch_group_size;
}

// Forward-step table, in chunk-major groups of `n` microbatches (the last group is the remainder).
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

// The 1F1B pattern shared by the interleaved and non-interleaved schedules: `warmup` forwards,
// then (F(k+warmup), B(k)) pairs, then the remaining backwards. Forward step k runs table[k];
// backward step k runs chunk V−1−table[k].chunk on that chunk's oldest stored microbatch.
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

}  // namespace

int warmup_steps(const ScheduleConfig& config, int rank) {
  validate(config);
  check_rank(config, rank);
  const int p = config.pipeline_size;
  const int m = config.num_microbatches;
  switch (config.kind) {
    case ScheduleKind::kNoPipelining:
      return 0;
    case ScheduleKind::kOneFOneB:
      return std::min(p - rank - 1, m);
    case ScheduleKind::kInterleaved: {
      const int v = config.virtual_size;
      return std::min(2 * (p - rank - 1) + (v - 1) * group_size(config), m * v);
    }
    case ScheduleKind::kCombined1F1B: {
      // One more warm-up forward than interleaved 1F1B makes each steady pair's F and B
      // independent (Megatron schedules.py, overlap_moe_expert_parallel_comm).
      const int v = config.virtual_size;
      if (p == 1) return std::min(1, m);
      return std::min(2 * (p - rank - 1) + (v - 1) * group_size(config) + 1, m * v);
    }
  }
  throw InternalError(
      fmt::format("warmup_steps: bad ScheduleKind {}", static_cast<int>(config.kind)));
}

std::vector<TableEntry> interleaved_table(const ScheduleConfig& config) {
  validate(config);
  return make_table(config.num_microbatches, config.virtual_size, group_size(config));
}

std::vector<Op> rank_ops(const ScheduleConfig& config, int rank) {
  const int warmup = warmup_steps(config, rank);  // validates config and rank
  const int m = config.num_microbatches;
  switch (config.kind) {
    case ScheduleKind::kNoPipelining: {
      std::vector<Op> ops;
      ops.reserve(2 * static_cast<size_t>(m));
      for (int mb = 0; mb < m; ++mb) {
        ops.push_back(Op{OpType::kForward, 0, mb, Phase::kSteady});
        ops.push_back(Op{OpType::kBackward, 0, mb, Phase::kSteady});
      }
      return ops;
    }
    case ScheduleKind::kOneFOneB:
      return one_f_one_b(make_table(m, 1, m), 1, warmup);
    case ScheduleKind::kInterleaved:
      return one_f_one_b(interleaved_table(config), config.virtual_size, warmup);
    case ScheduleKind::kCombined1F1B:
      if (config.pipeline_size == 1) return one_f_one_b(make_table(m, 1, m), 1, warmup);
      return one_f_one_b(interleaved_table(config), config.virtual_size, warmup);
  }
  throw InternalError(fmt::format("rank_ops: bad ScheduleKind {}", static_cast<int>(config.kind)));
}

}  // namespace mtp::schedule
