// File: harness/schedule/pipeline_sim.h
//
// Test-only: a dependency simulator for per-rank op lists. Stage i = v·P + p (rank p, chunk v;
// spec §4.5 ring: rank P−1 chunk v feeds rank 0 chunk v+1). F(i, mb) needs F(i−1, mb) unless
// i == 0; B(i, mb) needs B(i+1, mb) unless i is the last stage, and F(i, mb) (its own stored
// activation). Sends are unbounded (buffered): a produced output stays available until used.
// Ranks run round-robin, one op per turn; a rank blocks while its next op's inputs are missing.
#pragma once

#include <string>
#include <vector>

#include "harness/schedule/schedule.h"

namespace mtp::schedule::testing {

struct SimResult {
  bool finished = false;      ///< every rank ran its whole op list
  std::vector<int> executed;  ///< ops run per rank
  std::string blocked;        ///< when not finished: each stuck rank and its next op
};

/// Runs `ops_per_rank` (index = pipeline rank) with `virtual_size` chunks per rank until every
/// rank finishes or a full round makes no progress (deadlock).
SimResult simulate_pipeline(const std::vector<std::vector<Op>>& ops_per_rank, int virtual_size);

}  // namespace mtp::schedule::testing
