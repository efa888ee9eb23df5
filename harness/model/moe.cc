#include "harness/model/moe.h"

#include <fmt/format.h>

#include <tuple>

#include "harness/common/error.h"
#include "harness/config/param_specs.h"
#include "harness/model/layers.h"

namespace mtp::model {
namespace {

at::Tensor as_tokens(const at::Tensor& x) { return x.reshape({-1, x.size(-1)}); }

at::Tensor longs_on(const std::vector<int64_t>& v, const at::Device& device) {
  auto t = at::empty({static_cast<int64_t>(v.size())}, at::TensorOptions().dtype(at::kLong));
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t.to(device);
}

}  // namespace

MoeWeights MoeWeights::from(const ParamTable& params, const std::string& prefix,
                            const config::ModelConfig& cfg, const ExpertParallel* ep) {
  MoeWeights w;
  w.router = params.get(prefix + "mlp.router.weight");
  const int64_t count = ep != nullptr ? ep->num_local_experts() : cfg.num_moe_experts;
  w.first_expert = ep != nullptr ? ep->first_local_expert() : 0;
  for (int64_t e = w.first_expert; e < w.first_expert + count; ++e) {
    const std::string p = fmt::format("{}{}{}.", prefix, config::kRoutedExpertInfix, e);
    w.experts.push_back({params.get(p + "linear_fc1.weight"), params.get(p + "linear_fc2.weight")});
  }
  if (cfg.moe_shared_expert_intermediate_size > 0) {
    const std::string p = prefix + "mlp.shared_experts.";
    w.shared_expert =
        SwigluWeights{params.get(p + "linear_fc1.weight"), params.get(p + "linear_fc2.weight")};
  }
  return w;
}

at::Tensor topk_lower_id(const at::Tensor& values, int64_t k) {
  MTP_INTERNAL_ASSERT(values.dim() == 2 && k >= 1 && k <= values.size(1),
                      fmt::format("topk_lower_id: values {} dims, k = {}", values.dim(), k));
  // A stable sort keeps equal values in ascending index order, also when descending.
  auto sorted = at::sort(values, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
  return std::get<1>(sorted).narrow(-1, 0, k).contiguous();
}

ExpertPermutation permute_by_expert(const at::Tensor& top_experts, int64_t num_experts) {
  MTP_INTERNAL_ASSERT(top_experts.dim() == 2 && top_experts.scalar_type() == at::kLong,
                      "permute_by_expert: top_experts must be [T, k] int64");
  const int64_t k = top_experts.size(1);
  auto host = top_experts.to(at::kCPU).contiguous();
  const int64_t* ex = host.data_ptr<int64_t>();
  const int64_t n = host.numel();
  ExpertPermutation perm;
  perm.tokens_per_expert.assign(static_cast<size_t>(num_experts), 0);
  for (int64_t p = 0; p < n; ++p) {
    MTP_INTERNAL_ASSERT(ex[p] >= 0 && ex[p] < num_experts,
                        fmt::format("expert id {} outside 0..{}", ex[p], num_experts - 1));
    ++perm.tokens_per_expert[static_cast<size_t>(ex[p])];
  }
  // Counting sort: each expert's first row, then the pairs in ascending pair order (stable).
  std::vector<int64_t> next(static_cast<size_t>(num_experts), 0);
  for (int64_t e = 1; e < num_experts; ++e) {
    next[e] = next[e - 1] + perm.tokens_per_expert[static_cast<size_t>(e - 1)];
  }
  std::vector<int64_t> order(static_cast<size_t>(n)), row_token(order.size());
  std::vector<int64_t> inverse(order.size());
  for (int64_t p = 0; p < n; ++p) {
    const int64_t r = next[static_cast<size_t>(ex[p])]++;
    order[r] = p;
    row_token[r] = p / k;
    inverse[p] = r;
  }
  perm.order = longs_on(order, top_experts.device());
  perm.row_token = longs_on(row_token, top_experts.device());
  perm.inverse = longs_on(inverse, top_experts.device());
  return perm;
}

RoutingPlan route(const at::Tensor& x_norm, const at::Tensor& router_weight,
                  const config::ModelConfig& cfg) {
  const int64_t E = cfg.num_moe_experts, k = cfg.moe_router_topk;
  MTP_INTERNAL_ASSERT(
      router_weight.dim() == 2 && router_weight.size(0) == E,
      fmt::format("router weight has {} rows, num_moe_experts = {}", router_weight.size(0), E));
  RoutingPlan plan;
  // Megatron topk_routing_with_score_function: sigmoid(logits.float()).type_as(logits).
  auto logits = linear_no_bias(as_tokens(x_norm), router_weight);
  plan.scores = at::sigmoid(loss_precision(logits)).to(logits.scalar_type());  // [T, E]
  at::Tensor selection = plan.scores.detach();
  if (cfg.moe_router_enable_expert_bias && !cfg.moe_router_expert_bias.empty()) {
    auto bias = at::tensor(cfg.moe_router_expert_bias, at::TensorOptions().dtype(at::kDouble));
    selection = selection + bias.to(selection.options());
  }
  plan.top_experts = topk_lower_id(selection, k);
  // Gather the selected scores as index_select of the flattened [T·E] scores (pair (t, j) reads
  // t·E + top[t, j]); its backward adds into distinct positions.
  const int64_t T = plan.scores.size(0);
  auto flat_index = plan.top_experts + at::arange(T, plan.top_experts.options()).unsqueeze(1) * E;
  auto picked =
      at::index_select(plan.scores.reshape({-1}), 0, flat_index.reshape({-1})).view({T, k});
  plan.gates = k > 1 ? picked / (picked.sum(-1, /*keepdim=*/true) + 1e-20) : picked;
  if (cfg.moe_router_topk_scaling_factor != 1.0) {
    plan.gates = plan.gates * cfg.moe_router_topk_scaling_factor;
  }
  plan.permutation = permute_by_expert(plan.top_experts, E);
  return plan;
}

at::Tensor dispatch(const at::Tensor& x_norm, const RoutingPlan& plan) {
  return at::index_select(as_tokens(x_norm), 0, plan.permutation.row_token);
}

at::Tensor experts_forward(const at::Tensor& rows, const std::vector<int64_t>& rows_per_expert,
                           const std::vector<SwigluWeights>& experts, config::Kernels kernels) {
  MTP_INTERNAL_ASSERT(
      rows_per_expert.size() == experts.size(),
      fmt::format("{} row counts for {} experts", rows_per_expert.size(), experts.size()));
  auto slices = at::split_with_sizes(rows, rows_per_expert, 0);
  std::vector<at::Tensor> outs;
  outs.reserve(experts.size());
  for (size_t e = 0; e < experts.size(); ++e) {
    outs.push_back(swiglu(slices[e], experts[e].linear_fc1, experts[e].linear_fc2, kernels));
  }
  return at::cat(outs, 0);
}

at::Tensor shared_expert_forward(const at::Tensor& x_norm, const SwigluWeights& w,
                                 config::Kernels kernels) {
  return swiglu(as_tokens(x_norm), w.linear_fc1, w.linear_fc2, kernels);
}

at::Tensor combine(const at::Tensor& expert_out, const RoutingPlan& plan,
                   const at::Tensor& shared_out) {
  const int64_t T = plan.num_tokens(), k = plan.topk(), H = expert_out.size(-1);
  auto pairs = at::index_select(expert_out, 0, plan.permutation.inverse).view({T, k, H});
  auto weighted = pairs * plan.gates.unsqueeze(-1);  // [T, k, H]
  at::Tensor out = weighted.select(1, 0);
  for (int64_t j = 1; j < k; ++j) out = out + weighted.select(1, j);
  if (shared_out.defined()) out = out + shared_out;
  return out;
}

at::Tensor moe_mlp(const at::Tensor& x_norm, const MoeWeights& w, const config::ModelConfig& cfg) {
  RoutingPlan plan = route(x_norm, w.router, cfg);
  MTP_INTERNAL_ASSERT(static_cast<int64_t>(w.experts.size()) == cfg.num_moe_experts,
                      "moe_mlp runs every expert on one rank");
  auto expert_out = experts_forward(dispatch(x_norm, plan), plan.permutation.tokens_per_expert,
                                    w.experts, cfg.kernels);
  at::Tensor shared;
  if (w.shared_expert) shared = shared_expert_forward(x_norm, *w.shared_expert, cfg.kernels);
  return combine(expert_out, plan, shared).view(x_norm.sizes());
}

}  // namespace mtp::model
