// File: harness/engine/canonical_grads.h
//
// Opt-in reproducible accumulation (`accumulation = "canonical"`, issue 21): a step's gradient
// is summed in one fixed order whatever P, V and DP are, so that P = 1 ≡ P > 1 and DP = 1 ≡
// DP = 2 become bitwise expectations instead of tolerance ones.
//
// Megatron-LM's order (the default, grad_finalize.h) depends on the placement: autograd adds each
// copy's .grad over its own microbatches, the data-parallel all-reduce adds the replicas' partial
// sums and the embedding group adds the copies' partial sums. Canonical accumulation keeps every
// contribution apart instead — per global microbatch k (k = microbatch · DP + data-parallel rank,
// the record's batch order) and per use u (0: a parameter's own; the word-embedding table's
// input, MTP and tied-head uses, each through its own leaf: ChunkProgram::embedding_use) — and
// every holder of a parameter (each data-parallel replica, each embedding copy) gathers all of
// them and folds them left to right in slot order s = k · kUseSlots + u:
//   G = (((c_s0 + c_s1) + c_s2) + …) · (1/DP)
// in the main-grad dtype (bf16 contributions are widened first). Each contribution is the same
// computation in every placement (pipelining adds exact copies; the 1/M of the objective and the
// 1/DP are powers of two when M and DP are, so they scale exactly), hence the same bits.
// The cost: every holder keeps the step's contributions of its parameters (M_local × uses ×
// size) and receives those of the other holders.
#pragma once

#include <cstdint>

#include "harness/collectives/collectives.h"
#include "harness/engine/local_model.h"
#include "harness/engine/placement.h"
#include "harness/engine/topology.h"
#include "harness/model/program.h"

namespace mtp::engine {

/// After the whole backward of (`stage`, global microbatch `global_microbatch`): moves the
/// .grad of every parameter of that stage's chunk into its contributions (use 0) and the .grad
/// of each embedding-use leaf of `prog` into the word embedding's (its use), leaving no .grad.
/// A use that received no gradient contributes zeros.
void collect_microbatch_grads(LocalModel& model, int stage, int64_t global_microbatch,
                              const model::ChunkProgram& prog);

/// Replaces finalize_model_grads (grad_finalize.h) under canonical accumulation: for every local
/// parameter, gathers the contributions of every holder (data-parallel replicas × embedding
/// copies; all_gather over those ranks, collective over every rank), folds them in slot order,
/// scales by 1/DP and writes the main grad (the full gradient on every holder, so the copies
/// and replicas are bitwise equal). Clears the contributions. InternalError when two holders
/// give the same slot (a bug).
void finalize_canonical_grads(LocalModel& model, const ParamPlacement& placement,
                              const Topology& topology, int rank, collectives::Communicator& comm);

}  // namespace mtp::engine
