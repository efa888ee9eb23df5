// File: harness/model/program.h
//
// One microbatch's forward through one model chunk as an ordered list of nodes (Megatron-LM
// combined 1F1B: PreProcessNode, per layer attention / dispatch / mlp / combine / MTP
// post-process nodes, PostProcessNode; spec §4.6, models/common/model_chunk_schedule_plan.py,
// models/gpt/fine_grained_callables.py).
//
// Monolithic mode (plain schedules) runs every node with no boundary: one autograd graph per
// chunk and microbatch, backward in one call. Split mode (combined 1F1B) detaches every tensor
// that crosses a node boundary, as Megatron's ScheduleNode does, and runs each node's backward on
// its own: backward(node outputs, grads gathered on their detached copies). The two modes compute
// the same forward values; gradients differ only where a tensor's consumers are split over
// nodes and its gradient sum is associated differently — which is what the harness measures.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "harness/schedule/node_kind.h"

namespace mtp::model {

/// The kind of a node (schedule/node_kind.h: schedules order nodes by kind).
using schedule::NodeKind;

/// State and nodes of one microbatch of one chunk. Nodes share state through the members below.
class ChunkProgram {
 public:
  /// A node: its kind, the transformer layer it belongs to (−1 for pre/post-processing; MTP
  /// depth k is layer num_layers + k − 1) and the forward body.
  struct Node {
    NodeKind kind = NodeKind::kPreProcess;
    int layer = -1;
    std::function<void(ChunkProgram&)> forward;
  };

  /// The uses of the word-embedding table, in the canonical order of their contributions
  /// (engine/canonical_grads.h); 0 is a parameter's own (direct) use.
  enum class EmbeddingUse { kInput = 1, kMtp = 2, kHead = 3 };
  static constexpr int kUseSlots = 4;  ///< slots per global microbatch: direct + three uses

  /// `separate_embedding_uses`: embedding_use gives each use its own leaf (canonical
  /// accumulation); off, it returns the table itself.
  explicit ChunkProgram(bool split, bool separate_embedding_uses = false)
      : split_(split), separate_embedding_uses_(separate_embedding_uses) {}

  /// The tensor a use of the word-embedding `table` reads: the table itself, or with separate
  /// uses a new leaf sharing its storage (detached, requires_grad), whose .grad after the
  /// backward is this use's contribution alone. Call while building the program.
  at::Tensor embedding_use(const at::Tensor& table, EmbeddingUse use);
  /// The leaves embedding_use made, in the order they were made.
  const std::vector<std::pair<EmbeddingUse, at::Tensor>>& embedding_uses() const {
    return embedding_uses_;
  }

  /// Appends a node (building the program; nothing runs).
  void add(NodeKind kind, int layer, std::function<void(ChunkProgram&)> body);

  /// At a node boundary, for a tensor that later nodes read: split mode returns a detached copy
  /// (requires_grad as the original) and remembers the pair for this node's backward;
  /// monolithic mode returns `t`. Call only from inside a node body.
  at::Tensor cut(const at::Tensor& t);

  size_t size() const { return nodes_.size(); }
  const Node& node(size_t i) const { return nodes_[i]; }
  /// Runs node i's forward (nodes must run in order 0, 1, …). Between nodes the flowing
  /// `hidden` is cut automatically (and an mtp_hidden entry that is the same tensor is replaced
  /// by the same copy, so all its readers accumulate into one gradient); after the last node,
  /// `result` = `hidden` unless the node set `result` itself (the loss stage sets the objective).
  void forward_node(size_t i);
  /// Runs every node's forward in order.
  void forward_all();
  /// Node i's backward: autograd over the tensors node i handed to later nodes, with the grads
  /// gathered on their detached copies; for the last node also the chunk's result with
  /// `final_grad` (undefined for the loss stage's scalar objective). In monolithic mode only the
  /// last node has a backward (it covers the whole chunk).
  void backward_node(size_t i, const at::Tensor& final_grad);
  /// Every node's backward, last to first.
  void backward_all(const at::Tensor& final_grad);
  bool split() const { return split_; }

  // Shared state of the nodes (read and written by node bodies).
  at::Tensor input;                    ///< the received activation (requires_grad), or undefined
  at::Tensor hidden;                   ///< the activation flowing from node to node
  std::vector<at::Tensor> mtp_hidden;  ///< [h0, h1, …] while MTP depths run
  at::Tensor result;                   ///< the chunk's result: activation to send, or the objective
  at::Tensor lm;                       ///< loss stage: this microbatch's lm loss (0-dim, device)
  std::vector<at::Tensor> mtp;         ///< loss stage: this microbatch's mtp_k losses (0-dim)

  /// lm and mtp read back as doubles (waits for the device). InternalError when not set.
  double lm_value() const;
  std::vector<double> mtp_values() const;

 private:
  bool split_;
  bool separate_embedding_uses_ = false;
  std::vector<std::pair<EmbeddingUse, at::Tensor>> embedding_uses_;
  std::vector<Node> nodes_;
  std::vector<std::vector<std::pair<at::Tensor, at::Tensor>>> cuts_;  // per node: (orig, copy)
  size_t running_ = 0;
  size_t next_forward_ = 0;
};

}  // namespace mtp::model
