// File: harness/model/moe.h
//
// DeepSeek-V3-style Mixture-of-Experts MLP (sigmoid router, top-k with a fixed expert bias for
// selection, k routed SwiGLU experts per token, optional shared expert), split into the sub-steps
// the combined 1F1B schedule runs with detached boundaries (spec megatron_mtp_standalone.md §4.6:
// router, dispatch, experts, combine). Sources: Megatron-LM moe/router.py TopKRouter and
// moe/moe_utils.py topk_routing_with_score_function (sigmoid score function), moe/experts.py
// SequentialMLP, moe/shared_experts.py, moe/moe_layer.py; DeepSeek-V3 report §2.1.2.
//
// Tokens are the rows of x_norm viewed as [T, H], T = s·b (token t = s_idx·b + b_idx). Every
// float tensor is in the model dtype (fp32 in runs, fp64 in gradient checks). Determinism: the
// selection breaks ties by the lower expert id; the permutation is a stable counting sort on the
// host; gathers are index_select (no scatter or atomics in the forward); the k weighted expert
// outputs of a token are summed slot 0, 1, …, k−1, then the shared expert's output is added.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/model/expert_parallel.h"
#include "harness/model/param_table.h"

namespace mtp::model {

/// Weights of one SwiGLU MLP (a routed expert or the shared expert).
struct SwigluWeights {
  at::Tensor linear_fc1;  ///< [2F, H]: rows [0, F) gate, [F, 2F) up
  at::Tensor linear_fc2;  ///< [H, F]
};

/// Weights of one MoE MLP, looked up under `prefix` + "mlp." (names: params.h).
struct MoeWeights {
  at::Tensor router;  ///< [E, H] mlp.router.weight
  /// The routed experts this rank runs, local_experts.<e> for e = first_expert, …: all E, or
  /// with expert parallelism the E/EP of this EP rank (expert_parallel.h).
  std::vector<SwigluWeights> experts;
  int64_t first_expert = 0;                    ///< global index of experts[0]
  std::optional<SwigluWeights> shared_expert;  ///< mlp.shared_experts, when F_sh > 0
  /// `prefix` is the layer's ("decoder.layers.3.", "mtp.layers.0.transformer_layer.").
  /// `ep`: this rank's expert-parallel group (null: every expert is local).
  static MoeWeights from(const ParamTable& params, const std::string& prefix,
                         const config::ModelConfig& cfg, const ExpertParallel* ep = nullptr);
};

/// The grouping of the T·k (token, slot) pairs by expert. Pair p = t·k + j is token t's slot j.
/// All index tensors are int64 on the device of the routing inputs.
struct ExpertPermutation {
  /// [T·k]: dispatched row r holds pair order[r]. Stable sort by expert id: within an expert the
  /// pairs keep ascending pair order, i.e. ascending token order.
  at::Tensor order;
  at::Tensor row_token;  ///< [T·k]: order / k, the token that dispatched row r copies
  at::Tensor inverse;    ///< [T·k]: pair p sits at dispatched row inverse[p]
  /// [E] rows per expert; expert e owns rows [Σ_{e'<e} n_e', Σ_{e'≤e} n_e') (host copy, the
  /// split sizes of experts_forward).
  std::vector<int64_t> tokens_per_expert;
};

/// Everything dispatch / experts / combine need from the router.
struct RoutingPlan {
  at::Tensor scores;       ///< [T, E] sigmoid(x·Wᵀ), differentiable
  at::Tensor top_experts;  ///< [T, k] int64, slot 0 first (highest biased score)
  /// [T, k] gates of the selected experts, differentiable w.r.t. the router weight and x:
  /// selected scores (without bias) / (their sum + 1e-20) for k > 1 (the raw score for k = 1,
  /// as Megatron), times moe_router_topk_scaling_factor.
  at::Tensor gates;
  ExpertPermutation permutation;
  int64_t num_tokens() const { return top_experts.size(0); }
  int64_t topk() const { return top_experts.size(1); }
};

/// Indices of the k largest entries of each row of `values` [T, E] (floating), in descending
/// value order, ties broken by the LOWER column index (a stable descending sort: at::sort with
/// stable = true keeps equal values in index order). → [T, k] int64.
at::Tensor topk_lower_id(const at::Tensor& values, int64_t k);

/// Stable grouping of the assignments `top_experts` [T, k] (int64, values in [0, E)) by expert:
/// a counting sort on the host, so the result does not depend on any sort kernel.
ExpertPermutation permute_by_expert(const at::Tensor& top_experts, int64_t num_experts);

/// Router: scores = sigmoid(x·Wᵀ) [T, E]; selection = topk_lower_id(scores + expert_bias, k) with
/// the fixed moe_router_expert_bias (when enabled; selection only); gates from the unbiased
/// scores (RoutingPlan::gates); then permute_by_expert. x_norm [T, H] or [s, b, H] (the
/// pre-MLP-normalised hidden state), router_weight [E, H]. Megatron-LM TopKRouter with
/// moe_router_score_function = sigmoid (topk_routing_with_score_function); DeepSeek-V3 §2.1.2.
RoutingPlan route(const at::Tensor& x_norm, const at::Tensor& router_weight,
                  const config::ModelConfig& cfg);

/// Token dispatch: the rows of x_norm ([T, H] or [s, b, H]) in plan order → [T·k, H], grouped by
/// expert (index_select by permutation.row_token). Megatron moe_utils.permute (EP = 1).
at::Tensor dispatch(const at::Tensor& x_norm, const RoutingPlan& plan);

/// Routed experts: expert i runs SwiGLU on its contiguous slice of `rows` [R, H]
/// (rows_per_expert[i] rows, in order) → [R, H] (row r: the output of the expert that owns row r).
/// Every expert runs, on zero rows if it got no token, so every expert weight receives a (zero)
/// gradient. Megatron SequentialMLP. With every expert local, rows_per_expert =
/// plan.permutation.tokens_per_expert; with expert parallelism, ExpertParallel::local_rows.
/// `kernels` picks the SwiGLU activation (layers.h swiglu).
at::Tensor experts_forward(const at::Tensor& rows, const std::vector<int64_t>& rows_per_expert,
                           const std::vector<SwigluWeights>& experts, config::Kernels kernels);

/// Shared expert: SwiGLU of x_norm ([T, H] or [s, b, H]) → [T, H]. Megatron SharedExpertMLP
/// (no gate).
at::Tensor shared_expert_forward(const at::Tensor& x_norm, const SwigluWeights& w,
                                 config::Kernels kernels);

/// Combine: un-permute expert_out [T·k, H] to [T, k, H] (index_select by permutation.inverse),
/// multiply by the gates and sum over the slots in the fixed order 0, 1, …, k−1; then add
/// `shared_out` [T, H] when defined (routed sum first, then + shared). → [T, H].
/// Megatron moe_utils.unpermute + MoELayer (without scatter_add).
at::Tensor combine(const at::Tensor& expert_out, const RoutingPlan& plan,
                   const at::Tensor& shared_out = at::Tensor());

/// The MoE MLP: route, dispatch, experts_forward, shared_expert_forward (when present), combine.
/// x_norm [s, b, H] (or [T, H]) → the same shape. Megatron MoELayer.forward.
at::Tensor moe_mlp(const at::Tensor& x_norm, const MoeWeights& w, const config::ModelConfig& cfg);

}  // namespace mtp::model
