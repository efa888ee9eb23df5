// File: harness/engine/grad_finalize.h
//
// The gradient half of Megatron-LM's finalize_model_grads (megatron/core/distributed/
// finalize_model_grads.py), in its order: (1) the data-parallel sync of every chunk's main-grad
// buffer (finish_grad_sync: scale by gradient_scaling_factor = 1/DP, then all-reduce over the
// data-parallel group; param_and_grad_buffer.py start_grad_sync), (4) the word-embedding
// all-reduce over the embedding group (_allreduce_word_embedding_grads). Steps 2, 3, 5 and 6
// (conditional embedders, TP/SP layer norms, MoE expert-bias updates, per-token loss) do not
// apply: TP = CP = 1, the expert bias is fixed, the loss is averaged per microbatch.
//
// Both reductions use harness/collectives, so every element is summed in a fixed order: data-
// parallel ranks ascending, then embedding copies in ascending stage order (Megatron's NCCL
// all-reduce order is partition-dependent; determinism_anchors.md §2 rows 9–11).
#pragma once

#include <optional>

#include "harness/collectives/collectives.h"
#include "harness/engine/local_model.h"
#include "harness/engine/placement.h"
#include "harness/engine/topology.h"

namespace mtp::engine {

/// Turns `model`'s accumulated .grad into finalised main grads: load_main_grads, then the
/// data-parallel sync (DP > 1: all-reduce, or with the distributed optimizer reduce-scatter
/// into this rank's shards), then the embedding-group all-reduce (when the placement has one).
/// Afterwards the main grads are final everywhere (plain) or on this rank's shards (distributed
/// optimizer). Collective over every rank; `rank` is this rank's transport rank. `inject` =
/// kMtpEmbeddingOutOfGroup plants Megatron-Bridge #5380 (config/fault.h): the copy on stage
/// `mtp_stage` (the layout's MTP stage) keeps its own grad and the others sum without it.
/// `per_token_count` (calculate_per_token_loss: the global batch's main-mask token count N_0):
/// the data-parallel sync sums without the 1/DP average, and every main grad is then multiplied
/// by the float32 1/max(N_0, 1) (finalize_model_grads.py lines 697-713).
void finalize_model_grads(LocalModel& model, const ParamPlacement& placement,
                          const Topology& topology, int rank, collectives::Communicator& comm,
                          config::Fault inject = config::Fault::kNone, int mtp_stage = -1,
                          std::optional<double> per_token_count = std::nullopt);

/// With the distributed optimizer: data-parallel rank 0 of every pipeline rank receives the
/// other ranks' final shards, so its main grads are final everywhere (what the record holds).
/// Collective over each data-parallel group; a no-op with the plain optimizer or DP = 1.
void gather_main_grads_to_first_rank(LocalModel& model, const Topology& topology, int rank,
                                     collectives::Communicator& comm);

}  // namespace mtp::engine
