// File: harness/model/expert_parallel.h
//
// Expert parallelism (EP): the E routed experts of every MoE layer are split over the EP group,
// member i holding experts [i·E/EP, (i+1)·E/EP) (Megatron-LM's local experts, moe_layer.py
// local_expert_indices), and tokens travel to the experts that own them and back:
//   dispatch: each member's routed rows, grouped by global expert (moe.h dispatch), are cut into
//     one block per member (the rows for that member's experts) and exchanged by one
//     all-to-all; the received blocks, in source order, are then regrouped by local expert,
//     sources ascending inside each expert (Megatron MoEAlltoAllTokenDispatcher: all_to_all,
//     then sort_chunks_by_idxs when num_local_experts > 1);
//   combine: the exact inverse (regroup by source, all-to-all back, blocks in member order).
// Each is the other's adjoint, so the backward of dispatch is combine and vice versa. Both are
// pure data movement: no bit changes on the way. The row counts every member needs come from one
// all-gather of each member's tokens per expert (Megatron: the all-gather of
// num_local_tokens_per_expert in dispatch_preprocess). Example, EP = 2, E = 4, member 0 routes
// 3 rows to expert 1 and 2 rows to expert 2: it keeps the 3 rows, sends the 2 to member 1.
//
// Contract: the members of a group call these in the same order (SPMD). Not thread-safe: one
// thread at a time (the combined 1F1B side thread takes it while the rank thread computes).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "harness/collectives/collectives.h"

namespace mtp::model {

/// The EP rank holding global routed expert `expert` of `num_experts` over `ep_size` ranks:
/// expert / (num_experts / ep_size) (Megatron's contiguous local_expert_indices).
inline int expert_owner(int64_t expert, int64_t num_experts, int ep_size) {
  return static_cast<int>(expert / (num_experts / ep_size));
}

/// Every member's row counts of one dispatch: counts[src][e] = rows member src routes to global
/// expert e (its tokens_per_expert, moe.h ExpertPermutation).
struct ExpertCounts {
  std::vector<std::vector<int64_t>> counts;  ///< [EP][E]
};

/// One rank's place in its expert-parallel group.
class ExpertParallel {
 public:
  /// `group`'s members in EP rank order; this rank is comm.rank(); `num_experts` = E, a multiple
  /// of the group's size (InternalError otherwise, or when comm.rank() is not a member).
  /// `comm` must outlive this.
  ExpertParallel(collectives::Communicator& comm, collectives::Group group, int64_t num_experts);

  int size() const { return group_.size(); }
  int rank() const { return rank_; }  ///< this rank's EP rank (member index)
  const collectives::Group& group() const { return group_; }
  int64_t num_local_experts() const { return num_experts_ / size(); }
  int64_t first_local_expert() const { return rank_ * num_local_experts(); }
  /// The EP rank holding global expert `expert`.
  int owner_of(int64_t expert) const { return expert_owner(expert, num_experts_, size()); }
  bool holds(int64_t expert) const { return owner_of(expert) == rank_; }

  /// Every member's tokens_per_expert ([E] each), by one all-gather over the group of int64
  /// tensors on `device` (the transport's; a CUDA device's side stream).
  ExpertCounts exchange_counts(const std::vector<int64_t>& tokens_per_expert, at::Device device);
  /// Rows this member's local expert le receives after dispatch: Σ_src counts[src][first + le].
  std::vector<int64_t> local_rows(const ExpertCounts& c) const;

  /// Dispatch inside autograd: permuted [T·k, H] (this member's routed rows, grouped by global
  /// expert, counts[rank()] rows each) → [R, H], R = Σ local_rows, grouped by local expert, then
  /// by source member ascending. Backward: combine of the gradient. With CUDA tensors the
  /// autograd node holds CPU copies (as ContextParallel::all_gather_sequence), so its blocking
  /// backward runs on the calling thread, and every device copy and all-to-all of the move, both
  /// ways, runs as a synchronous section on the device's side stream (gpu/side_stream.h), so that
  /// inside a combined 1F1B side task it does not wait for the paired compute node.
  at::Tensor dispatch(const at::Tensor& permuted, const ExpertCounts& c);
  /// Combine inside autograd, the inverse of dispatch: expert_out [R, H] → [T·k, H] in the
  /// order of dispatch's input. Backward: dispatch of the gradient.
  at::Tensor combine(const at::Tensor& expert_out, const ExpertCounts& c);

  /// The raw moves (no autograd), on the tensors' device: what dispatch / combine compute.
  at::Tensor move_to_experts(const at::Tensor& permuted, const ExpertCounts& c);
  at::Tensor move_to_sources(const at::Tensor& expert_out, const ExpertCounts& c);

 private:
  collectives::Communicator& comm_;
  collectives::Group group_;
  int rank_;
  int64_t num_experts_;
};

}  // namespace mtp::model
