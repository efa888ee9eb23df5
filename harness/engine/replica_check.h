// File: harness/engine/replica_check.h
//
// After every optimizer step, every copy of every parameter (data-parallel replicas, the
// word-embedding copies of the first stage and the MTP stage) must hold the recorded copy's bits
// (data-parallel rank 0, the owner stage): a copy that drifted would make the record describe a
// model that some rank does not train. Megatron-LM keeps them equal by construction
// (finalize_model_grads.py's embedding all-reduce, the distributed optimizer's all-gather); this
// checks it.
#pragma once

#include <cstdint>
#include <string>

#include "harness/collectives/collectives.h"
#include "harness/common/error.h"
#include "harness/engine/local_model.h"
#include "harness/engine/placement.h"
#include "harness/engine/topology.h"

namespace mtp::engine {

/// A copy of a parameter whose bits differ from the recorded copy after an optimizer step (a
/// data-parallel replica or a word-embedding copy drifted). what() names the step, the tensor,
/// and both copies' (data-parallel rank, pipeline rank, stage).
class ReplicaDriftError : public InfraError {
 public:
  explicit ReplicaDriftError(const std::string& msg) : InfraError(msg) {}
};

/// Each rank sends an XXH3-64 digest of every local parameter (LocalModel::params order) to rank
/// 0, which compares every copy with the recorded one and broadcasts its verdict, so every rank
/// stops together: throws ReplicaDriftError on every rank (rank 0's names the first mismatch in
/// canonical order) when a copy differs. Collective over topo.world(); returns at once without
/// communicating when there is one rank and no second word-embedding copy. With expert
/// parallelism a routed expert's copies are those of its EP rank's expert-data-parallel group
/// (`num_experts` = E), and its recorded copy is gradient-group member = that EP rank.
void check_replicas(int64_t step, const LocalModel& model, const ParamPlacement& placement,
                    const Topology& topo, int pipeline_size, int64_t num_experts,
                    collectives::Communicator& comm, const at::Device& device);

}  // namespace mtp::engine
