#include "harness/model/program.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>

#include "harness/common/error.h"

namespace mtp::model {

at::Tensor ChunkProgram::embedding_use(const at::Tensor& table, EmbeddingUse use) {
  if (!separate_embedding_uses_) return table;
  at::Tensor leaf = table.detach().requires_grad_(true);
  embedding_uses_.emplace_back(use, leaf);
  return leaf;
}

void ChunkProgram::add(NodeKind kind, int layer, std::function<void(ChunkProgram&)> body) {
  nodes_.push_back({kind, layer, std::move(body)});
  cuts_.emplace_back();
}

at::Tensor ChunkProgram::cut(const at::Tensor& t) {
  if (!split_ || !t.defined()) return t;
  MTP_INTERNAL_ASSERT(running_ < nodes_.size(), "cut() outside a node");
  at::Tensor copy = t.detach();
  copy.requires_grad_(t.requires_grad());
  cuts_[running_].emplace_back(t, copy);
  return copy;
}

void ChunkProgram::forward_node(size_t i) {
  MTP_INTERNAL_ASSERT(i == next_forward_, fmt::format("node {} run out of order", i));
  running_ = i;
  nodes_[i].forward(*this);
  if (i + 1 < nodes_.size()) {
    at::Tensor copy = cut(hidden);
    for (auto& h : mtp_hidden) {
      if (h.is_same(hidden)) h = copy;  // h_k read by the next depth and by the heads: one copy
    }
    hidden = copy;
  } else if (!result.defined()) {
    // A chunk that only passes its input on still returns a distinct graph node (Megatron clones).
    result = hidden.is_same(input) ? hidden.clone() : hidden;
  }
  running_ = nodes_.size();
  ++next_forward_;
}

void ChunkProgram::forward_all() {
  for (size_t i = next_forward_; i < nodes_.size(); ++i) forward_node(i);
}

void ChunkProgram::backward_node(size_t i, const at::Tensor& final_grad) {
  const bool last = i + 1 == nodes_.size();
  if (!split_ && !last) return;  // one graph: the last node's backward covers everything
  std::vector<at::Tensor> roots, grads;
  for (auto& [orig, copy] : cuts_[i]) {
    if (!orig.requires_grad() || !copy.grad().defined()) continue;
    roots.push_back(orig);
    grads.push_back(copy.grad());
  }
  if (last && result.defined() && result.requires_grad()) {
    roots.push_back(result);
    grads.push_back(final_grad);  // undefined: implicit 1 for the scalar objective
  }
  cuts_[i].clear();
  if (roots.empty()) return;
  torch::autograd::backward(roots, grads);
}

double ChunkProgram::lm_value() const {
  MTP_INTERNAL_ASSERT(lm.defined(), "lm loss read before the loss stage ran");
  return lm.item<double>();
}

std::vector<double> ChunkProgram::mtp_values() const {
  std::vector<double> out;
  out.reserve(mtp.size());
  for (const at::Tensor& t : mtp) out.push_back(t.item<double>());
  return out;
}

void ChunkProgram::backward_all(const at::Tensor& final_grad) {
  for (size_t i = nodes_.size(); i-- > 0;) backward_node(i, final_grad);
}

}  // namespace mtp::model
