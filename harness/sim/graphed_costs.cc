#include "harness/sim/graphed_costs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "harness/common/error.h"

namespace mtp::sim {
namespace {

void check(const NodeCost& c, const char* what) {
  for (double v : {c.forward_ms, c.backward_ms}) {
    if (!std::isfinite(v) || v < 0.0) {
      throw InputError(
          fmt::format("graphed stage times: {} = {} ms (must be finite, >= 0)", what, v));
    }
  }
}

/// a − b, clamped at 0, per direction.
NodeCost minus(const NodeCost& a, const NodeCost& b) {
  return {std::max(0.0, a.forward_ms - b.forward_ms), std::max(0.0, a.backward_ms - b.backward_ms)};
}

}  // namespace

std::map<CostNode, NodeCost> costs_from_graphed_stages(const GraphedStageTimes& t,
                                                       std::vector<std::string>* notes) {
  check(t.embedding, "E");
  check(t.one_layer, "t");
  check(t.three_layers, "ttt");
  check(t.mtp_block, "m");
  check(t.loss_with_mtp, "L with MTP");
  check(t.loss_without_mtp, "L without MTP");
  const NodeCost two = minus(t.three_layers, t.one_layer);
  const NodeCost layer{two.forward_ms / 2.0, two.backward_ms / 2.0};
  const NodeCost op = minus(t.one_layer, layer);
  std::map<CostNode, NodeCost> out;
  out[CostNode::kChunkOp] = op;
  out[CostNode::kDecoderDense] = layer;
  out[CostNode::kDecoderMoe] = layer;
  out[CostNode::kEmbedding] = minus(t.embedding, op);
  out[CostNode::kMtpBlockDense] = minus(t.mtp_block, op);
  out[CostNode::kMtpBlockMoe] = out[CostNode::kMtpBlockDense];
  out[CostNode::kFinalLayernorm] = {};
  const NodeCost head = minus(t.loss_without_mtp, op);
  out[CostNode::kOutputHead] = head;
  out[CostNode::kMtpHead] = mtp_head_cost(minus(t.loss_with_mtp, t.loss_without_mtp), head, notes);
  return out;
}

}  // namespace mtp::sim
