// MoE layer checks: the split MoE MLP (route, dispatch, experts, combine) against an independent
// dense loop over experts in float64 (output and every gradient), top-k tie-breaking and the
// expert bias, the stable permutation, bitwise repeatability, config validation and parameter
// names (harness/model/moe.h, params.h).
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "harness/common/error.h"
#include "harness/model/layers.h"
#include "harness/model/moe.h"
#include "harness/model/params.h"

namespace mtp::model {
namespace {

std::vector<int64_t> to_vec(const at::Tensor& t) {
  auto c = t.contiguous().to(at::kLong);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

at::Tensor longs(std::vector<int64_t> v, std::vector<int64_t> shape) {
  return at::tensor(v, at::kLong).view(shape);
}

// Deterministic N(0, std) data without the global generator (params.h initial_value).
at::Tensor normal(const std::string& name, std::vector<int64_t> shape, double std, uint64_t seed,
                  at::ScalarType dtype = at::kDouble) {
  return initial_value({name, std::move(shape), std}, seed).to(dtype);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

config::ModelConfig small_moe_config() {
  config::ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.ffn_hidden_size = 12;
  c.num_attention_heads = 2;
  c.num_query_groups = 1;
  c.vocab_size = 16;
  c.seq_length = 6;
  c.micro_batch_size = 2;
  c.mtp_num_layers = 1;
  c.num_moe_experts = 4;
  c.moe_router_topk = 2;
  c.moe_ffn_hidden_size = 6;
  c.moe_shared_expert_intermediate_size = 5;
  c.moe_router_enable_expert_bias = true;
  c.moe_router_expert_bias = {0.05, -0.1, 0.0, 0.02};
  c.moe_router_topk_scaling_factor = 2.5;
  return c;
}

// One MoE layer's MLP weights as leaves (fp64 unless told), ×10 so that routing and SwiGLU are
// far from linear.
struct MoeLeaves {
  ParamTable params;
  MoeWeights w;
  MoeLeaves(const config::ModelConfig& cfg, at::ScalarType dtype, uint64_t seed) {
    for (const auto& spec : config::layer_param_specs("decoder.layers.1.", cfg, /*is_moe=*/true)) {
      if (spec.name.find(".mlp.") == std::string::npos) continue;
      params.add(spec.name, (initial_value(spec, seed) * 10.0).to(dtype).set_requires_grad(true));
    }
    w = MoeWeights::from(params, "decoder.layers.1.", cfg);
  }
};

// ---- (a) against an independent dense float64 implementation --------------------------------

// Top-k of one token's biased scores by a plain loop: strictly greater wins, so the lower
// expert id wins a tie.
std::vector<int64_t> reference_topk(const std::vector<double>& v, int64_t k) {
  std::vector<int64_t> picked;
  std::vector<bool> used(v.size(), false);
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (size_t e = 0; e < v.size(); ++e) {
      if (!used[e] && (best < 0 || v[e] > v[static_cast<size_t>(best)])) {
        best = static_cast<int64_t>(e);
      }
    }
    used[static_cast<size_t>(best)] = true;
    picked.push_back(best);
  }
  return picked;
}

at::Tensor reference_swiglu(const at::Tensor& x, const at::Tensor& fc1, const at::Tensor& fc2) {
  const int64_t F = fc2.size(1);
  auto gate = at::matmul(x, fc1.narrow(0, 0, F).t());
  auto up = at::matmul(x, fc1.narrow(0, F, F).t());
  return at::matmul(gate * at::sigmoid(gate) * up, fc2.t());
}

// Dense MoE: every expert on every token, weighted by G[t, e] = gate or 0. Returns [T, H] and the
// selection [T, k] and min selection margin through the out-parameters.
at::Tensor reference_moe(const at::Tensor& x, const MoeWeights& w, const config::ModelConfig& cfg,
                         std::vector<int64_t>* selection, double* min_margin) {
  const int64_t H = x.size(-1), E = cfg.num_moe_experts, k = cfg.moe_router_topk;
  auto X = x.reshape({-1, H});
  const int64_t T = X.size(0);
  auto scores = at::sigmoid(at::matmul(X, w.router.t()));  // [T, E]
  auto host = scores.detach().contiguous();
  auto mask = at::zeros({T, E}, at::kDouble);
  *min_margin = 1e300;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> biased(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      const double bias = cfg.moe_router_expert_bias.empty() ? 0.0 : cfg.moe_router_expert_bias[e];
      biased[e] = host[t][e].item<double>() + bias;
    }
    auto top = reference_topk(biased, k);
    for (int64_t e : top) {
      mask[t][e] = 1.0;
      selection->push_back(e);
    }
    std::vector<double> sorted = biased;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    if (k < E) *min_margin = std::min(*min_margin, sorted[k - 1] - sorted[k]);
  }
  auto sel = scores * mask;
  // Megatron: normalise the selected scores for k > 1; top-1 keeps the raw score.
  auto G = (k > 1 ? sel / (sel.sum(-1, /*keepdim=*/true) + 1e-20) : sel) *
           cfg.moe_router_topk_scaling_factor;
  auto out = at::zeros({T, H}, at::kDouble);
  for (int64_t e = 0; e < E; ++e) {
    const auto& ex = w.experts[e];
    out = out + G.narrow(1, e, 1) * reference_swiglu(X, ex.linear_fc1, ex.linear_fc2);
  }
  if (w.shared_expert) {
    out = out + reference_swiglu(X, w.shared_expert->linear_fc1, w.shared_expert->linear_fc2);
  }
  return out;
}

void expect_matches_dense_reference(const config::ModelConfig& cfg, uint64_t seed) {
  const int64_t s = cfg.seq_length, b = cfg.micro_batch_size, H = cfg.hidden_size;
  MoeLeaves a(cfg, at::kDouble, seed), r(cfg, at::kDouble, seed);
  auto x0 = normal("x", {s, b, H}, 1.0, seed);
  auto probe = normal("probe", {s, b, H}, 1.0, seed);  // loss = Σ y·probe
  auto xa = x0.clone().set_requires_grad(true);
  auto xr = x0.clone().set_requires_grad(true);

  auto ya = moe_mlp(xa, a.w, cfg);
  (ya * probe).sum().backward();
  std::vector<int64_t> selection;
  double margin = 0;
  auto yr = reference_moe(xr, r.w, cfg, &selection, &margin).view({s, b, H});
  (yr * probe).sum().backward();

  ASSERT_GT(margin, 1e-6) << "inputs too close to a routing tie";
  EXPECT_EQ(to_vec(route(xa.detach(), a.w.router, cfg).top_experts), selection);
  const double tol = 1e-12;
  EXPECT_LT(max_abs_diff(ya, yr), tol * (1 + yr.abs().max().item<double>()));
  EXPECT_LT(max_abs_diff(xa.grad(), xr.grad()), tol * (1 + xr.grad().abs().max().item<double>()));
  for (size_t i = 0; i < a.params.entries().size(); ++i) {
    const auto& [name, pa] = a.params.entries()[i];
    const auto& pr = r.params.entries()[i].second;
    ASSERT_TRUE(pa.grad().defined()) << name;
    ASSERT_TRUE(pr.grad().defined()) << name;
    EXPECT_LT(max_abs_diff(pa.grad(), pr.grad()), tol * (1 + pr.grad().abs().max().item<double>()))
        << name;
  }
}

TEST(MoeTest, MatchesDenseLoopOverExpertsFloat64) {
  auto cfg = small_moe_config();
  expect_matches_dense_reference(cfg, 11);
  // Top-1 (gate = raw score, Megatron), no shared expert, no bias, other seed.
  cfg.moe_router_topk = 1;
  cfg.moe_shared_expert_intermediate_size = 0;
  cfg.moe_router_enable_expert_bias = false;
  cfg.moe_router_expert_bias.clear();
  cfg.moe_router_topk_scaling_factor = 1.0;
  expect_matches_dense_reference(cfg, 12);
  // Top-3 of 4.
  cfg.moe_router_topk = 3;
  expect_matches_dense_reference(cfg, 13);
}

TEST(MoeTest, ExpertWithoutTokensGetsZeroGradient) {
  auto cfg = small_moe_config();
  cfg.moe_router_expert_bias = {0.0, 0.0, 0.0, -10.0};  // expert 3 is never selected
  expect_matches_dense_reference(cfg, 21);
  MoeLeaves a(cfg, at::kDouble, 21);
  auto x = normal("x", {6, 2, 8}, 1.0, 21);
  auto plan = route(x, a.w.router, cfg);
  EXPECT_EQ(plan.permutation.tokens_per_expert[3], 0);
  moe_mlp(x, a.w, cfg).sum().backward();
  for (const auto* t : {&a.w.experts[3].linear_fc1, &a.w.experts[3].linear_fc2}) {
    ASSERT_TRUE(t->grad().defined());
    EXPECT_EQ(t->grad().abs().max().item<double>(), 0.0);
  }
}

// ---- (b) top-k ties and the expert bias -----------------------------------------------------

TEST(MoeRouterTest, TopKBreaksTiesByLowerExpertId) {
  auto v = at::tensor({1.0,  3.0, 3.0,  2.0,  //
                       5.0,  5.0, 5.0,  5.0,  //
                       0.0,  1.0, 1.0,  1.0,  //
                       2.0,  2.0, 1.0,  2.0,  //
                       -0.0, 0.0, -1.0, 0.0},
                      at::kDouble)
               .view({5, 4});
  EXPECT_EQ(to_vec(topk_lower_id(v, 2)), (std::vector<int64_t>{1, 2, 0, 1, 1, 2, 0, 1, 0, 1}));
  EXPECT_EQ(to_vec(topk_lower_id(v, 3)),
            (std::vector<int64_t>{1, 2, 3, 0, 1, 2, 1, 2, 3, 0, 1, 3, 0, 1, 3}));
  EXPECT_EQ(to_vec(topk_lower_id(v.to(at::kFloat), 1)), (std::vector<int64_t>{1, 0, 1, 0, 0}));
  // A long row of equal values (sort implementations switch algorithm with size).
  auto flat = at::zeros({2, 300}, at::kFloat);
  flat[1][7] = 1.0f;
  EXPECT_EQ(to_vec(topk_lower_id(flat, 3)), (std::vector<int64_t>{0, 1, 2, 7, 0, 1}));
}

config::ModelConfig router_config(int64_t k) {
  config::ModelConfig c;
  c.hidden_size = 2;
  c.num_moe_experts = 4;
  c.moe_router_topk = k;
  return c;
}

TEST(MoeRouterTest, ExactScoreTiesThroughTheRouter) {
  // Experts 1 and 2 have identical router rows: their scores are bitwise equal for every token.
  auto W = at::tensor({0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.5, 0.0}, at::kDouble).view({4, 2});
  auto x = at::tensor({1.0, 0.0, -1.0, 0.0}, at::kDouble).view({2, 2});
  // Token 0: σ(1) for e1, e2 > σ(0.5) e3 > σ(0) e0. Token 1: σ(0) e0 > σ(−0.5) e3 > σ(−1) e1 = e2.
  EXPECT_EQ(to_vec(route(x, W, router_config(1)).top_experts), (std::vector<int64_t>{1, 0}));
  auto p2 = route(x, W, router_config(2));
  EXPECT_EQ(to_vec(p2.top_experts), (std::vector<int64_t>{1, 2, 0, 3}));
  EXPECT_EQ(p2.gates[0][0].item<double>(), 0.5);  // equal scores → equal gates
  EXPECT_EQ(p2.gates[0][1].item<double>(), 0.5);
  EXPECT_EQ(to_vec(route(x, W, router_config(3)).top_experts),
            (std::vector<int64_t>{1, 2, 3, 0, 3, 1}));
  // A bias that breaks the tie the other way.
  auto cfg = router_config(1);
  cfg.moe_router_enable_expert_bias = true;
  cfg.moe_router_expert_bias = {0.0, 0.0, 1e-3, 0.0};
  EXPECT_EQ(to_vec(route(x, W, cfg).top_experts), (std::vector<int64_t>{2, 0}));
}

TEST(MoeRouterTest, ExpertBiasChangesSelectionButNotGates) {
  // One token, scores σ(2) > σ(1) > σ(0.5) > σ(0).
  auto W = at::tensor({2.0, 0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 0.0}, at::kDouble).view({4, 2});
  auto x = at::tensor({1.0, 0.0}, at::kDouble).view({1, 2});
  auto sig = [](double z) { return 1.0 / (1.0 + std::exp(-z)); };
  auto cfg = router_config(2);
  auto plain = route(x, W, cfg);
  EXPECT_EQ(to_vec(plain.top_experts), (std::vector<int64_t>{0, 1}));
  EXPECT_NEAR(plain.gates[0][0].item<double>(), sig(2) / (sig(2) + sig(1)), 1e-15);

  cfg.moe_router_enable_expert_bias = true;
  cfg.moe_router_expert_bias = {0.0, 0.0, 0.0, 1.0};  // e3: 0.5 + 1 wins the selection
  auto biased = route(x, W, cfg);
  EXPECT_EQ(to_vec(biased.top_experts), (std::vector<int64_t>{3, 0}));
  // Gates come from the unbiased scores σ(0) = 0.5 and σ(2), not from 1.5.
  EXPECT_NEAR(biased.gates[0][0].item<double>(), 0.5 / (0.5 + sig(2)), 1e-15);
  EXPECT_NEAR(biased.gates[0][1].item<double>(), sig(2) / (0.5 + sig(2)), 1e-15);
  EXPECT_TRUE(at::equal(biased.scores, plain.scores));

  // A bias that keeps the selection leaves the gates bitwise unchanged.
  cfg.moe_router_expert_bias = {0.01, 0.0, 0.0, 0.0};
  auto same = route(x, W, cfg);
  EXPECT_TRUE(at::equal(same.top_experts, plain.top_experts));
  EXPECT_TRUE(at::equal(same.gates, plain.gates));

  // Scaling factor multiplies the normalised gates; top-1 keeps the raw score (Megatron).
  cfg.moe_router_expert_bias.clear();
  cfg.moe_router_topk_scaling_factor = 2.0;
  EXPECT_NEAR(route(x, W, cfg).gates.sum().item<double>(), 2.0, 1e-15);
  auto top1 = router_config(1);
  EXPECT_NEAR(route(x, W, top1).gates[0][0].item<double>(), sig(2), 1e-15);
}

// ---- (c) stable permutation -----------------------------------------------------------------

TEST(MoePermutationTest, StableByExpertThenToken) {
  // Pairs p = t·k + j: p0 (t0,e2) p1 (t0,e0) p2 (t1,e0) p3 (t1,e1) p4 (t2,e2) p5 (t2,e1)
  // p6 (t3,e0) p7 (t3,e2); expert 3 gets nothing.
  auto top = longs({2, 0, 0, 1, 2, 1, 0, 2}, {4, 2});
  auto perm = permute_by_expert(top, 4);
  EXPECT_EQ(to_vec(perm.order), (std::vector<int64_t>{1, 2, 6, 3, 5, 0, 4, 7}));
  EXPECT_EQ(to_vec(perm.row_token), (std::vector<int64_t>{0, 1, 3, 1, 2, 0, 2, 3}));
  EXPECT_EQ(to_vec(perm.inverse), (std::vector<int64_t>{5, 0, 1, 3, 6, 4, 2, 7}));
  EXPECT_EQ(perm.tokens_per_expert, (std::vector<int64_t>{3, 2, 3, 0}));
  EXPECT_THROW(permute_by_expert(longs({0, 4}, {1, 2}), 4), InternalError);
}

// combine = g0·out(slot 0) + g1·out(slot 1) + … + shared, in exactly that order (bitwise).
void expect_combine_in_slot_order(const at::Tensor& top_experts, int64_t num_experts) {
  const int64_t T = top_experts.size(0), k = top_experts.size(1), H = 5;
  RoutingPlan plan;
  plan.top_experts = top_experts;
  plan.permutation = permute_by_expert(top_experts, num_experts);
  auto x = normal("x", {T, H}, 1.0, 3, at::kFloat);
  auto rows = dispatch(x, plan);
  ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{T * k, H}));
  const std::vector<int64_t> row_token = to_vec(plan.permutation.row_token);
  for (int64_t r = 0; r < T * k; ++r) EXPECT_TRUE(at::equal(rows[r], x[row_token[r]]));
  // Expert outputs: an arbitrary function of the row.
  auto out = rows * 3.0f + normal("noise", {T * k, H}, 1.0, 4, at::kFloat);
  plan.gates = normal("gates", {T, k}, 1.0, 5, at::kFloat);
  auto shared = normal("shared", {T, H}, 1.0, 6, at::kFloat);
  auto y = combine(out, plan, shared);
  auto y_routed = combine(out, plan);
  const std::vector<int64_t> inv = to_vec(plan.permutation.inverse);
  for (int64_t t = 0; t < T; ++t) {
    at::Tensor expect = out[inv[t * k]] * plan.gates[t][0];
    for (int64_t j = 1; j < k; ++j) expect = expect + out[inv[t * k + j]] * plan.gates[t][j];
    EXPECT_TRUE(at::equal(y_routed[t], expect)) << "token " << t;
    EXPECT_TRUE(at::equal(y[t], expect + shared[t])) << "token " << t;
  }
}

TEST(MoePermutationTest, DispatchAndCombineRoundTripInFixedSlotOrder) {
  expect_combine_in_slot_order(longs({2, 0, 0, 1, 2, 1, 0, 2}, {4, 2}), 4);
  // k = 3: the slot order is visible in the bits (fp addition is not associative).
  expect_combine_in_slot_order(longs({0, 1, 2, 2, 1, 0, 1, 3, 0, 3, 2, 1, 0, 2, 3}, {5, 3}), 4);
  // k = 1: the gate times the expert output (plus the shared output).
  expect_combine_in_slot_order(longs({1, 0, 1}, {3, 1}), 2);
}

// ---- (d) bitwise repeatability --------------------------------------------------------------

std::vector<at::Tensor> forward_backward_fp32(const config::ModelConfig& cfg) {
  MoeLeaves m(cfg, at::kFloat, 31);
  auto x = normal("x", {cfg.seq_length, cfg.micro_batch_size, cfg.hidden_size}, 1.0, 31, at::kFloat)
               .set_requires_grad(true);
  auto probe =
      normal("probe", {cfg.seq_length, cfg.micro_batch_size, cfg.hidden_size}, 1.0, 32, at::kFloat);
  auto y = moe_mlp(x, m.w, cfg);
  (y * probe).sum().backward();
  std::vector<at::Tensor> out{y.detach(), x.grad()};
  for (const auto& [name, p] : m.params.entries()) out.push_back(p.grad());
  return out;
}

TEST(MoeDeterminismTest, RepeatableAndIndependentOfIntraOpThreads) {
  config::ModelConfig cfg;
  cfg.hidden_size = 64;
  cfg.seq_length = 128;
  cfg.micro_batch_size = 4;  // T = 512 tokens
  cfg.num_moe_experts = 8;
  cfg.moe_router_topk = 2;
  cfg.moe_ffn_hidden_size = 96;
  cfg.moe_shared_expert_intermediate_size = 64;
  cfg.moe_router_enable_expert_bias = true;
  cfg.moe_router_expert_bias = {0.01, -0.02, 0.0, 0.03, 0.0, 0.0, -0.01, 0.02};
  auto equal_bits = [](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!at::equal(a[i], b[i])) return false;
    }
    return true;
  };
  const int saved = at::get_num_threads();
  auto first = forward_backward_fp32(cfg);
  for (int run = 1; run < 10; ++run) EXPECT_TRUE(equal_bits(first, forward_backward_fp32(cfg)));
  at::set_num_threads(1);
  auto one = forward_backward_fp32(cfg);
  at::set_num_threads(2);
  auto two = forward_backward_fp32(cfg);
  at::set_num_threads(saved);
  EXPECT_TRUE(equal_bits(one, two));
  EXPECT_TRUE(equal_bits(first, one));
}

// ---- (f) names, init, config ----------------------------------------------------------------

TEST(MoeInitTest, ParameterSpecsListMegatronNamesInCanonicalOrder) {
  config::ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.hidden_size = 8;
  cfg.ffn_hidden_size = 12;
  cfg.num_attention_heads = 2;
  cfg.num_query_groups = 2;
  cfg.mtp_num_layers = 1;
  cfg.num_moe_experts = 2;
  cfg.moe_ffn_hidden_size = 4;
  cfg.moe_shared_expert_intermediate_size = 3;
  cfg.moe_layer_freq = {0, 1};
  cfg.validate();
  EXPECT_FALSE(cfg.is_moe_layer(0));
  EXPECT_TRUE(cfg.is_moe_layer(1));
  EXPECT_TRUE(cfg.mtp_layer_is_moe());
  const double std_out = 0.02 / std::sqrt(4.0);
  auto moe_mlp_specs = [&](const std::string& p) {
    return std::vector<config::ParamSpec>{
        {p + "mlp.router.weight", {2, 8}, 0.02},
        {p + "mlp.experts.local_experts.0.linear_fc1.weight", {8, 8}, 0.02},
        {p + "mlp.experts.local_experts.0.linear_fc2.weight", {8, 4}, std_out},
        {p + "mlp.experts.local_experts.1.linear_fc1.weight", {8, 8}, 0.02},
        {p + "mlp.experts.local_experts.1.linear_fc2.weight", {8, 4}, std_out},
        {p + "mlp.shared_experts.linear_fc1.weight", {6, 8}, 0.02},
        {p + "mlp.shared_experts.linear_fc2.weight", {8, 3}, std_out}};
  };
  auto attention_specs = [&](const std::string& p) {
    return std::vector<config::ParamSpec>{
        {p + "input_layernorm.weight", {8}, 0.0},
        {p + "self_attention.linear_qkv.weight", {24, 8}, 0.02},
        {p + "self_attention.linear_proj.weight", {8, 8}, std_out},
        {p + "pre_mlp_layernorm.weight", {8}, 0.0}};
  };
  std::vector<config::ParamSpec> expect{{"embedding.word_embeddings.weight", {256, 8}, 0.02}};
  auto append = [&](std::vector<config::ParamSpec> v) {
    expect.insert(expect.end(), v.begin(), v.end());
  };
  append(attention_specs("decoder.layers.0."));
  append({{"decoder.layers.0.mlp.linear_fc1.weight", {24, 8}, 0.02},
          {"decoder.layers.0.mlp.linear_fc2.weight", {8, 12}, std_out}});
  append(attention_specs("decoder.layers.1."));
  append(moe_mlp_specs("decoder.layers.1."));
  append({{"decoder.final_layernorm.weight", {8}, 0.0},
          {"mtp.layers.0.enorm.weight", {8}, 0.0},
          {"mtp.layers.0.hnorm.weight", {8}, 0.0},
          {"mtp.layers.0.eh_proj.weight", {8, 16}, 0.02}});
  append(attention_specs("mtp.layers.0.transformer_layer."));
  append(moe_mlp_specs("mtp.layers.0.transformer_layer."));
  append(
      {{"mtp.layers.0.final_layernorm.weight", {8}, 0.0}, {"output_layer.weight", {256, 8}, 0.02}});

  auto specs = config::parameter_specs(cfg);
  ASSERT_EQ(specs.size(), expect.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, expect[i].name) << i;
    EXPECT_EQ(specs[i].shape, expect[i].shape) << expect[i].name;
    EXPECT_DOUBLE_EQ(specs[i].init_std, expect[i].init_std) << expect[i].name;
  }
  // config::layer_param_names is the names of the same layer's specs.
  auto names = config::layer_param_names("mtp.layers.0.transformer_layer.", cfg, /*is_moe=*/true);
  ASSERT_EQ(names.size(), 11u);
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i], specs[22 + i].name);
  EXPECT_EQ(config::layer_param_names("decoder.layers.0.", cfg, false).back(),
            "decoder.layers.0.mlp.linear_fc2.weight");
  // Every routed expert starts from its own values.
  ASSERT_EQ(specs[14].name, "decoder.layers.1.mlp.experts.local_experts.1.linear_fc1.weight");
  EXPECT_FALSE(at::equal(initial_value(specs[12], 5), initial_value(specs[14], 5)));
  // A dense config (defaults) lists exactly the dense names.
  config::ModelConfig dense;
  for (const auto& s : config::parameter_specs(dense)) {
    EXPECT_EQ(s.name.find("expert"), std::string::npos) << s.name;
    EXPECT_EQ(s.name.find("router"), std::string::npos) << s.name;
  }
}

}  // namespace
}  // namespace mtp::model
