// File: harness/collectives/collectives.h
//
// Collectives with a fixed reduction order, built from the transport's point-to-point messages:
// all-reduce, reduce-scatter, all-gather, broadcast, gather and all-to-all within a group of
// ranks, plus
// ordered point-to-point send/recv. Every reduction adds the members' tensors in ascending member
// index, element by element, with one IEEE add per member: element e of a sum over members
// x_0 … x_{n−1} is ((x_0[e] + x_1[e]) + x_2[e]) + … on every member, for every group size, on the
// in-process transport and on NCCL alike (NCCL's own all-reduce picks a ring or tree order that
// depends on the chunk an element falls in, determinism_anchors.md §2 rows 9–10, so it is not
// used). all_reduce_sum(x) and reduce_scatter_sum(x) give the same bits for every element.
//
// Shards: a flat tensor of numel elements is split over n members as shard_range() says: member
// i holds [⌊i·numel/n⌋, ⌊(i+1)·numel/n⌋). Megatron-LM's distributed optimizer pads its buffers to
// a multiple of n first (param_and_grad_buffer.py), which makes the split equal.
//
// Contract: every member of a group calls the group's collectives in the same order (SPMD); each
// member counts its calls per group, and the count tags the messages, so concurrent collectives
// of different groups never mix. Tensors are contiguous, on the transport's device; shapes and
// dtypes agree across members.
//
// Example (on every rank r of 0..3, each in its own thread or process):
//   collectives::Communicator comm(transport, r);
//   collectives::Group dp{"data-parallel group", {0, 1, 2, 3}};
//   comm.all_reduce_sum(dp, grad);   // grad = ((g0 + g1) + g2) + g3, bitwise equal on every rank
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/transport/transport.h"

namespace mtp::collectives {

/// A set of transport ranks that run collectives together. Member i is ranks[i]; reductions add
/// members in ascending i.
struct Group {
  std::string name;        ///< names the group in errors and timeout reports
  std::vector<int> ranks;  ///< distinct transport ranks in canonical (reduction) order
  /// 0, or a tag that keeps this group's messages apart from another group's over the same
  /// ranks driven by another Communicator of the same rank (the expert-parallel group's, whose
  /// all-to-alls run on the combined 1F1B side thread): mixed into id() when non-zero.
  uint64_t channel = 0;

  int size() const { return static_cast<int>(ranks.size()); }
  bool contains(int rank) const;
  /// The member index of `rank`. Throws InternalError when `rank` is not a member.
  int index_of(int rank) const;
  /// A stable 64-bit id of `ranks` (FNV-1a over the rank list, then `channel` when non-zero),
  /// carried in message tags.
  uint64_t id() const;
};

/// [begin, end) of member `index`'s shard when `numel` elements are split over `parts` members:
/// [⌊index·numel/parts⌋, ⌊(index+1)·numel/parts⌋).
std::pair<int64_t, int64_t> shard_range(int64_t numel, int parts, int index);

/// One rank's endpoint for collectives over a shared transport. Not thread-safe: one per rank.
class Communicator {
 public:
  /// `rank` is this endpoint's transport rank.
  Communicator(transport::Transport& transport, int rank);

  int rank() const { return rank_; }
  transport::Transport& transport() { return tr_; }

  /// Sends a copy of `t` to `dst`. Messages between two ranks are matched in the order they were
  /// sent. Never blocks.
  void send(int dst, const at::Tensor& t);
  /// Receives the next message from `src` (shape `shape`). Throws InfraError on timeout or a
  /// shape mismatch, TransportAborted when the transport was aborted.
  at::Tensor recv(int src, const std::vector<int64_t>& shape);

  /// In-place sum of `t` over `group`: afterwards every member holds ((x_0 + x_1) + …) + x_{n−1}.
  /// Implemented as reduce_scatter_sum then all_gather over the flat view. `t` contiguous, same
  /// shape on every member; this rank must be a member (InternalError otherwise).
  void all_reduce_sum(const Group& group, at::Tensor& t);
  /// Sum over `group` of the flat tensor `t` (every member's full-length input); returns this
  /// member's shard of the sum (shard_range(t.numel(), n, index)), a new 1-D tensor.
  at::Tensor reduce_scatter_sum(const Group& group, const at::Tensor& t);
  /// Concatenation of every member's shard in member order: `shard` is this member's part of a
  /// flat tensor of `numel` elements (its length must be that of shard_range); returns [numel].
  at::Tensor all_gather(const Group& group, const at::Tensor& shard, int64_t numel);
  /// After the call every member's `t` holds the `root` member's values (`root` is a transport
  /// rank in the group).
  void broadcast(const Group& group, int root, at::Tensor& t);
  /// Every member sends `t`; `root` returns all of them in member order (its own included),
  /// every other member an empty vector. Shapes may differ per member only if `shapes` (at the
  /// root, per member) says so; empty = every member's is t's.
  std::vector<at::Tensor> gather(const Group& group, int root, const at::Tensor& t,
                                 const std::vector<std::vector<int64_t>>& shapes = {});
  /// All-to-all: `parts[j]` goes to member j (this member's own part is returned as given);
  /// returns the parts every member i addressed to this member, in member order. Shapes may
  /// differ per pair (an expert-parallel token dispatch): `recv_shapes[i]` is the shape of
  /// member i's part for this member (a part may have 0 rows). Pure data movement, no
  /// arithmetic: the bits are those sent. One part per member, or InternalError.
  std::vector<at::Tensor> all_to_all(const Group& group, const std::vector<at::Tensor>& parts,
                                     const std::vector<std::vector<int64_t>>& recv_shapes);

 private:
  int64_t next_sequence(const Group& group);
  void note(const Group& group, const char* what);

  transport::Transport& tr_;
  const int rank_;
  std::map<std::vector<int>, int64_t> group_calls_;
  std::map<int, int64_t> sent_to_, received_from_;
};

}  // namespace mtp::collectives
