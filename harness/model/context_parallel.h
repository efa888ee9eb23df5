// File: harness/model/context_parallel.h
//
// Context parallelism (CP): the sequence of every microbatch is cut into 2·CP chunks of s/(2·CP)
// tokens, and CP rank i holds chunks i and 2·CP−1−i, in that order (Megatron-LM's load-balanced
// split, megatron/training/utils.py get_batch_on_this_cp_rank: causal attention costs more for
// later chunks, so each rank takes one early and one late chunk). Example, CP = 2, s = 8:
// chunks [0 1][2 3][4 5][6 7]; rank 0 holds positions 0 1 6 7, rank 1 holds 2 3 4 5.
//
// What crosses ranks, and how (every exchange is a collective of harness/collectives, fixed
// order, the same bits on threads and on NCCL):
//   attention: K and V are all-gathered over the CP group and put back into global sequence
//     order (Megatron's cp_comm_type "all_gather"); the gradient of the gathered K/V is
//     reduce-scattered, members added in ascending CP rank (all_gather_sequence);
//   MTP: the roll of token ids, labels and loss masks by one position crosses chunk boundaries
//     (Megatron-LM multi_token_prediction.py roll_tensor with a cp_group): roll_left;
//   the loss stage's reported losses: the per-token losses gathered into global order
//     (gather_sequence), so they are summed as one sequence.
// Contract: the members of a group call these in the same order (SPMD), as every collective.
// A ContextParallel of size 1 is the identity everywhere and sends nothing.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "harness/collectives/collectives.h"

namespace mtp::model {

/// One rank's place in its context-parallel group. Not thread-safe (it drives the rank's
/// Communicator): use it on the rank's own thread, forward and backward.
class ContextParallel {
 public:
  /// `group`'s members in CP rank order; this rank is comm.rank(). `comm` must outlive this.
  /// Throws InternalError when comm.rank() is not a member.
  ContextParallel(collectives::Communicator& comm, collectives::Group group);

  int size() const { return group_.size(); }
  int rank() const { return rank_; }  ///< this rank's CP rank (member index)
  const collectives::Group& group() const { return group_; }

  /// This rank's tokens of a full sequence: chunks rank and 2·size−1−rank of `full` along `dim`,
  /// concatenated (copies). full [..., s, ...] → [..., s/size, ...]. InternalError unless s is a
  /// multiple of 2·size.
  at::Tensor shard(const at::Tensor& full, int64_t dim) const;
  /// The global positions of this rank's tokens in a sequence of `seq_length`: [s/size] int64.
  at::Tensor positions(int64_t seq_length) const;

  /// The full sequence from every member's shard, in global order (no autograd): local
  /// [..., s/size, ...] along `dim` → [..., s, ...]. Every member must call it.
  at::Tensor gather_sequence(const at::Tensor& local, int64_t dim);
  /// gather_sequence of local [s/size, ...] along dim 0 inside autograd: its backward
  /// reduce-scatters the incoming gradient [s, ...] so that each member receives Σ over members
  /// (ascending CP rank) of the gradient of its own tokens. Used for K and V (Megatron
  /// cp_comm_type "all_gather": AllGatherComm, backward reduce_scatter). With CUDA tensors the
  /// autograd node holds CPU copies, so that its backward (which waits for the other members)
  /// runs on this rank's thread, not on the autograd device thread all rank threads share.
  at::Tensor all_gather_sequence(const at::Tensor& local);
  /// The adjoint of gather_sequence along dim 0: global [s, ...] (a gradient in global order)
  /// → [s/size, ...], each member's tokens summed over the members in ascending CP rank
  /// (reduce-scatter). Every member must call it.
  at::Tensor reduce_scatter_sequence(const at::Tensor& global);
  /// roll_left over the whole sequence: shift the last dimension left by one and write 0 into
  /// the global last position; t [b, s/size] holds this rank's shard, and the result is the
  /// shard of the rolled sequence. Source: Megatron-LM multi_token_prediction.py roll_tensor
  /// with a cp_group (each chunk rolled, its vacated slot filled from the next chunk's first
  /// token, which lives on the next or previous CP rank). The boundary tokens travel by one
  /// all-gather of every member's two first tokens (Megatron: isend/irecv to its neighbours).
  at::Tensor roll_left(const at::Tensor& t);

 private:
  collectives::Communicator& comm_;
  collectives::Group group_;
  int rank_;
};

}  // namespace mtp::model
