// File: harness/schedule/pipeline_sim.cc
//
// Test-only dependency simulator; see pipeline_sim.h.
#include "harness/schedule/pipeline_sim.h"

#include <fmt/format.h>

#include <algorithm>

namespace mtp::schedule::testing {

SimResult simulate_pipeline(const std::vector<std::vector<Op>>& ops_per_rank, int virtual_size) {
  const int p = static_cast<int>(ops_per_rank.size());
  const int num_stages = p * virtual_size;
  int m = 0;
  for (const auto& ops : ops_per_rank) {
    for (const Op& op : ops) {
      m = std::max(m, op.microbatch + 1);
    }
  }
  // fwd_done[stage][mb]: F output of (stage, mb) was produced (sent); likewise bwd_done.
  std::vector<std::vector<bool>> fwd_done(num_stages, std::vector<bool>(m, false));
  std::vector<std::vector<bool>> bwd_done(num_stages, std::vector<bool>(m, false));

  SimResult result;
  result.executed.assign(p, 0);
  auto ready = [&](int rank, const Op& op) {
    const int stage = op.chunk * p + rank;
    if (op.type == OpType::kForward) {
      return stage == 0 || fwd_done[stage - 1][op.microbatch];
    }
    const bool grad_in = stage == num_stages - 1 || bwd_done[stage + 1][op.microbatch];
    return grad_in && fwd_done[stage][op.microbatch];
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int rank = 0; rank < p; ++rank) {
      const auto& ops = ops_per_rank[rank];
      int& next = result.executed[rank];
      if (next == static_cast<int>(ops.size()) || !ready(rank, ops[next])) {
        continue;
      }
      const Op& op = ops[next];
      const int stage = op.chunk * p + rank;
      auto& done = op.type == OpType::kForward ? fwd_done : bwd_done;
      done[stage][op.microbatch] = true;
      ++next;
      progress = true;
    }
  }
  result.finished = true;
  for (int rank = 0; rank < p; ++rank) {
    const auto& ops = ops_per_rank[rank];
    if (result.executed[rank] < static_cast<int>(ops.size())) {
      result.finished = false;
      result.blocked += fmt::format("rank {} blocked at op {} ({}); ", rank, result.executed[rank],
                                    format_ops({ops[result.executed[rank]]}));
    }
  }
  return result;
}

}  // namespace mtp::schedule::testing
