// File: harness/schedule/ops.cc
//
// Warm-up counts, the interleaved schedule table and the per-rank op lists, each from the
// schedule's row (registry.cc; spec §4.3-4.5).
#include <fmt/format.h>

#include "harness/schedule/pattern.h"

namespace mtp::schedule {
namespace {

void check_rank(const ScheduleConfig& config, int rank) {
  if (rank < 0 || rank >= config.pipeline_size) {
    throw ScheduleError(fmt::format("{} schedule: rank {} is outside [0, P) (P={})",
                                    schedule_kind_name(config.kind), rank, config.pipeline_size));
  }
}

}  // namespace

int warmup_steps(const ScheduleConfig& config, int rank) {
  validate(config);
  check_rank(config, rank);
  return schedule_def(config.kind).warmup(config, rank);
}

std::vector<TableEntry> interleaved_table(const ScheduleConfig& config) {
  validate(config);
  return detail::make_table(config.num_microbatches, config.virtual_size,
                            detail::group_size(config));
}

std::vector<Op> rank_ops(const ScheduleConfig& config, int rank) {
  const int warmup = warmup_steps(config, rank);  // validates config and rank
  return schedule_def(config.kind).ops(config, rank, warmup);
}

bool combined_pair_at(bool combined, const std::vector<Op>& ops, size_t j) {
  return combined && j + 1 < ops.size() && ops[j].phase == Phase::kSteady &&
         ops[j].type == OpType::kForward && ops[j + 1].type == OpType::kBackward;
}

}  // namespace mtp::schedule
