// The unpipelined model's gradients (autograd, through the MTP loss auto-scaler) against
// float64 central finite differences of the true objective J = (1/M)·[lm + (λ/D)·Σ_k mtp_k]
// (megatron_conventions.md "Arithmetic" 8–9).
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <cmath>

#include "harness/model/layers.h"
#include "harness/model/loss.h"
#include "harness/model/mtp.h"
#include "harness/model/params.h"

namespace mtp::model {
namespace {

// `moe`: 3 layers with moe_layer_freq {0, 1, 1} (dense, MoE, MoE), 4 experts, top-2, a shared
// expert, a fixed expert bias and D = 1, so the MTP layer is MoE too.
struct Tiny {
  config::ModelConfig cfg;
  ParamTable params;
  at::Tensor tokens, labels, mask;
  explicit Tiny(bool moe = false) {
    cfg.num_layers = 2;
    cfg.hidden_size = 8;
    cfg.ffn_hidden_size = 12;
    cfg.num_attention_heads = 2;
    cfg.num_query_groups = 1;  // GQA path
    cfg.vocab_size = 16;
    cfg.seq_length = 6;
    cfg.micro_batch_size = 2;
    cfg.mtp_num_layers = 2;
    cfg.mtp_loss_scaling_factor = 0.3;
    if (moe) {
      cfg.num_layers = 3;
      cfg.mtp_num_layers = 1;
      cfg.num_moe_experts = 4;
      cfg.moe_router_topk = 2;
      cfg.moe_ffn_hidden_size = 6;
      cfg.moe_shared_expert_intermediate_size = 5;
      cfg.moe_layer_freq = {0, 1, 1};
      cfg.moe_router_enable_expert_bias = true;
      cfg.moe_router_expert_bias = {0.02, -0.03, 0.0, 0.01};
      cfg.moe_router_topk_scaling_factor = 1.5;
    }
    cfg.validate();
    for (auto spec : config::parameter_specs(cfg)) {
      if (spec.init_std == 0.0) spec.init_std = 0.3;  // norms away from 1 to exercise them
      auto t = initial_value(spec, 99) * (spec.name.find("norm") != std::string::npos ? 1.0 : 10.0);
      if (spec.name.find("norm") != std::string::npos) t = t + 1.0;
      params.add(spec.name, t.set_requires_grad(true));
    }
    auto gen = at::arange(0, 12, at::kLong);
    tokens = (gen * 7 + 3).remainder(16).view({2, 6});
    labels = roll_left(tokens);
    labels.select(1, 5).fill_(5);
    mask = at::ones({2, 6}, at::kDouble);
    mask[1][2] = 0.0;
  }
  LossOutput run(int64_t M) const {
    auto rope = rope_tables(cfg.seq_length, cfg.kv_channels(), cfg.rotary_base, at::kDouble);
    const auto& E = params.get(config::kWordEmbeddingName);
    auto x = embedding_lookup(tokens, E);
    std::vector<int> layers;
    for (int i = 0; i < cfg.num_layers; ++i) layers.push_back(i);
    auto h = decoder_layers_forward(x, layers, params, cfg, rope);
    auto h0 = rms_norm(h, params.get(config::kFinalLayernormName), cfg.norm_epsilon);
    auto hs = mtp_block_forward(h0, tokens, E, params, cfg, rope);
    hs.insert(hs.begin(), h0);
    return loss_stage_forward(hs, params.get(config::kOutputLayerName), {labels, mask}, cfg, M);
  }
  double objective(int64_t M) const {
    c10::NoGradGuard ng;
    auto out = run(M);
    double mtp = 0;
    for (const at::Tensor& v : out.mtp) mtp += v.item<double>();
    return (out.lm.item<double>() + cfg.mtp_loss_scaling_factor / cfg.mtp_num_layers * mtp) / M;
  }
};

void expect_autograd_matches_finite_differences(const Tiny& m) {
  const int64_t M = 4;
  auto out = m.run(M);
  out.objective.backward();
  const double eps = 1e-6;
  int checked = 0;
  for (const auto& [name, p] : m.params.entries()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    auto flat = p.detach().view({-1});
    auto grad = p.grad().view({-1});
    const int64_t n = flat.numel();
    // Up to 4 elements per tensor, spread over the tensor; for the embedding also a row that
    // only the MTP path reads (roll introduces token 0 only via the MTP inputs).
    std::vector<int64_t> idx{0, n / 3, (2 * n) / 3, n - 1};
    for (int64_t i : idx) {
      const double orig = flat[i].item<double>();
      flat[i] = orig + eps;
      const double up = m.objective(M);
      flat[i] = orig - eps;
      const double down = m.objective(M);
      flat[i] = orig;
      const double fd = (up - down) / (2 * eps);
      const double ag = grad[i].item<double>();
      EXPECT_NEAR(ag, fd, 1e-7 + 1e-5 * std::abs(fd)) << name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(GradCheckTest, AutogradMatchesFloat64FiniteDifferences) {
  expect_autograd_matches_finite_differences(Tiny());
}

// Routing is piecewise constant: central differences with eps = 1e-6 are exact up to O(eps²)
// only while no token's k-th and (k+1)-th biased scores are within ~eps of a swap; a flip would
// show up as a large mismatch in every tensor upstream of that router.
TEST(GradCheckTest, MoeModelAutogradMatchesFloat64FiniteDifferences) {
  Tiny m(/*moe=*/true);
  ASSERT_TRUE(m.params.has("decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight"));
  ASSERT_TRUE(m.params.has("mtp.layers.0.transformer_layer.mlp.shared_experts.linear_fc1.weight"));
  ASSERT_TRUE(m.params.has("decoder.layers.0.mlp.linear_fc1.weight"));
  expect_autograd_matches_finite_differences(m);
  // Every routed expert of every MoE layer was selected by some token (else its check is 0 = 0).
  int experts = 0;
  for (const auto& [name, p] : m.params.entries()) {
    if (name.find("local_experts") == std::string::npos) continue;
    EXPECT_GT(p.grad().abs().max().item<double>(), 0.0) << name;
    ++experts;
  }
  EXPECT_EQ(experts, 3 * 4 * 2);  // 2 decoder MoE layers + 1 MTP layer, 4 experts, fc1 and fc2
}

TEST(GradCheckTest, MtpTermsChangeTheGradientButNotTheForward) {
  // λ = 0 vs λ = 0.3: the same forward value, different gradients on the MTP path.
  Tiny a, b;
  b.cfg.mtp_loss_scaling_factor = 0.0;
  auto oa = a.run(2), ob = b.run(2);
  EXPECT_EQ(oa.objective.item<double>(), ob.objective.item<double>());
  oa.objective.backward();
  ob.objective.backward();
  EXPECT_FALSE(at::equal(a.params.get("mtp.layers.1.eh_proj.weight").grad(),
                         b.params.get("mtp.layers.1.eh_proj.weight").grad().defined()
                             ? b.params.get("mtp.layers.1.eh_proj.weight").grad()
                             : at::zeros_like(a.params.get("mtp.layers.1.eh_proj.weight"))));
}

}  // namespace
}  // namespace mtp::model
