// Closed-form and hand-computed checks of the shared model pieces (roll, MTP loss, scaler,
// RoPE, causality, init).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "harness/model/layers.h"
#include "harness/model/loss.h"
#include "harness/model/mtp.h"
#include "harness/model/params.h"

namespace mtp::model {
namespace {

at::Tensor longs(std::vector<int64_t> v, std::vector<int64_t> shape) {
  return at::tensor(v, at::kLong).view(shape);
}

std::vector<int64_t> to_vec(const at::Tensor& t) {
  auto c = t.contiguous().to(at::kLong);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

TEST(RollTest, ShiftsLeftAndZeroesLastSpecVectors) {
  // spec §7.3: [10,20,30,40,50] → [20,30,40,50,0]; rows roll independently.
  EXPECT_EQ(to_vec(roll_left(longs({10, 20, 30, 40, 50}, {1, 5}))),
            (std::vector<int64_t>{20, 30, 40, 50, 0}));
  auto two = longs({10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, {2, 5});
  EXPECT_EQ(to_vec(roll_left(two)), (std::vector<int64_t>{20, 30, 40, 50, 0, 70, 80, 90, 100, 0}));
}

TEST(RollTest, LabelsAndMasksPerDepthFollowSpecTable) {
  // spec §1.3 table and §7.3 "derives_labels_from_input_ids": ids [10,20,30,40,50]:
  // labels (depth 0) = [20,30,40,50,0]; depth-1 labels = [30,40,50,0,0]; depth-2 = [40,50,0,0,0].
  auto ids = longs({10, 20, 30, 40, 50}, {1, 5});
  auto labels = roll_left(ids);
  auto l1 = roll_left(labels);
  auto l2 = roll_left(l1);
  EXPECT_EQ(to_vec(l1), (std::vector<int64_t>{30, 40, 50, 0, 0}));
  EXPECT_EQ(to_vec(l2), (std::vector<int64_t>{40, 50, 0, 0, 0}));
  // All-ones mask: depth k has 1 for i < s−k, N_k = s−k.
  auto mask = at::ones({1, 5}, at::kFloat);
  auto m1 = roll_left(mask);
  auto m2 = roll_left(m1);
  EXPECT_EQ(to_vec(m1), (std::vector<int64_t>{1, 1, 1, 1, 0}));
  EXPECT_EQ(to_vec(m2), (std::vector<int64_t>{1, 1, 1, 0, 0}));
  EXPECT_EQ(m2.sum().item<float>(), 3.0f);
}

/// The hand-computable loss model: H = 2, V = 3, s = 3, b = 1, D = 1, λ = 0.5.
config::ModelConfig hand_loss_config() {
  config::ModelConfig cfg;
  cfg.hidden_size = 2;
  cfg.vocab_size = 3;
  cfg.seq_length = 3;
  cfg.micro_batch_size = 1;
  cfg.mtp_num_layers = 1;
  cfg.mtp_loss_scaling_factor = 0.5;
  return cfg;
}

/// Cross entropy of the logits (a, b, a + b) (head W = [[1, 0], [0, 1], [1, 1]]) at `label`.
double ce(double a, double b, int label) {
  double l[3] = {a, b, a + b};
  double mx = std::max(l[0], std::max(l[1], l[2]));
  double se = std::exp(l[0] - mx) + std::exp(l[1] - mx) + std::exp(l[2] - mx);
  return std::log(se) - (l[label] - mx);
}

// Hand-computable MTP loss: H = 2, V = 3, s = 3, b = 1, D = 1, λ = 0.5, M = 2.
TEST(LossTest, MtpLossMatchesHandComputation) {
  config::ModelConfig cfg = hand_loss_config();
  const int64_t M = 2;
  auto dbl = at::TensorOptions().dtype(at::kDouble);
  // head W [3, 2]: logits = (h0, h1, h0 + h1).
  auto W = at::tensor({1.0, 0.0, 0.0, 1.0, 1.0, 1.0}, dbl).view({3, 2}).set_requires_grad(true);
  std::vector<double> h0v{0.5, -1.0, 2.0, 0.0, -0.5, 1.5};  // [s=3, b=1, H=2]
  std::vector<double> h1v{1.0, 1.0, -2.0, 0.5, 0.25, 0.75};
  auto h0 = at::tensor(h0v, dbl).view({3, 1, 2}).set_requires_grad(true);
  auto h1 = at::tensor(h1v, dbl).view({3, 1, 2}).set_requires_grad(true);
  LossInputs in{longs({2, 0, 1}, {1, 3}), at::tensor({1.0, 0.0, 1.0}, dbl).view({1, 3})};
  LossOutput out = loss_stage_forward({h0, h1}, W, in, cfg, M);

  // Main: labels [2,0,1], mask [1,0,1] → N = 2.
  const double main = (ce(0.5, -1.0, 2) + ce(-0.5, 1.5, 1)) / 2.0;
  // Depth 1: labels roll → [0,1,0], mask roll → [0,1,0], N_1 = 1: only position 1.
  const double mtp1 = ce(-2.0, 0.5, 1) / 1.0;
  EXPECT_NEAR(out.lm.item<double>(), main, 1e-14);
  ASSERT_EQ(out.mtp.size(), 1u);
  EXPECT_NEAR(out.mtp[0].item<double>(), mtp1, 1e-14);
  // Forward value of the objective carries only the main term: main / M.
  EXPECT_NEAR(out.objective.item<double>(), main / M, 1e-14);

  out.objective.backward();
  // ∂J/∂h1[pos 1] = (λ/D)·(1/M)·(1/N_1)·Wᵀ(softmax − onehot), other positions 0.
  const double a = -2.0, b = 0.5;
  double l[3] = {a, b, a + b};
  double z = std::exp(l[0]) + std::exp(l[1]) + std::exp(l[2]);
  double p[3] = {std::exp(l[0]) / z, std::exp(l[1]) / z - 1.0, std::exp(l[2]) / z};  // label 1
  const double c = 0.5 / 1.0 / M / 1.0;
  auto g1 = h1.grad();
  EXPECT_NEAR(g1[1][0][0].item<double>(), c * (p[0] + p[2]), 1e-14);
  EXPECT_NEAR(g1[1][0][1].item<double>(), c * (p[1] + p[2]), 1e-14);
  EXPECT_EQ(g1[0].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(g1[2].abs().sum().item<double>(), 0.0);
  // h0 at the masked position 1 gets no gradient.
  EXPECT_EQ(h0.grad()[1].abs().sum().item<double>(), 0.0);
}

// The same microbatch under calculate_per_token_loss, as one of several of a global batch whose
// counts are N_0 = 10, N_1 = 4: the objective is the masked sum (no 1/N, no 1/M), lm and mtp_1
// are this microbatch's shares of the global means, and depth 1's gradient carries
// (λ/D)·N_0/N_1 with auto-scaler scale 1 (the engine divides every main grad by N_0 later).
TEST(LossTest, PerTokenLossIsTheMaskedSumWithDepthsRescaledByGlobalCounts) {
  config::ModelConfig cfg = hand_loss_config();
  cfg.calculate_per_token_loss = true;
  auto dbl = at::TensorOptions().dtype(at::kDouble);
  auto W = at::tensor({1.0, 0.0, 0.0, 1.0, 1.0, 1.0}, dbl).view({3, 2});
  auto h0 =
      at::tensor({0.5, -1.0, 2.0, 0.0, -0.5, 1.5}, dbl).view({3, 1, 2}).set_requires_grad(true);
  auto h1 =
      at::tensor({1.0, 1.0, -2.0, 0.5, 0.25, 0.75}, dbl).view({3, 1, 2}).set_requires_grad(true);
  LossInputs in{
      longs({2, 0, 1}, {1, 3}), at::tensor({1.0, 0.0, 1.0}, dbl).view({1, 3}), {10.0, 4.0}};
  LossOutput out = loss_stage_forward({h0, h1}, W, in, cfg, /*num_microbatches=*/2);
  const double main_sum = ce(0.5, -1.0, 2) + ce(-0.5, 1.5, 1);
  const double mtp1_sum = ce(-2.0, 0.5, 1);
  EXPECT_NEAR(out.objective.item<double>(), main_sum, 1e-14);
  EXPECT_NEAR(out.lm.item<double>(), main_sum / 10.0, 1e-14);
  EXPECT_NEAR(out.mtp[0].item<double>(), mtp1_sum / 4.0, 1e-14);
  out.objective.backward();
  const double a = -2.0, b = 0.5;
  const double z = std::exp(a) + std::exp(b) + std::exp(a + b);
  const double p[3] = {std::exp(a) / z, std::exp(b) / z - 1.0, std::exp(a + b) / z};
  const double c = 0.5 * (10.0 / 4.0);  // λ/D · N_0/N_1, scale 1
  EXPECT_NEAR(h1.grad()[1][0][0].item<double>(), c * (p[0] + p[2]), 1e-14);
  EXPECT_NEAR(h1.grad()[1][0][1].item<double>(), c * (p[1] + p[2]), 1e-14);
  // The planted #7452 bug rescales by other counts (a rank's own): N_0/N_1 = 6/3 here.
  auto h1b = h1.detach().clone().set_requires_grad(true);
  LossInputs local = in;
  local.mtp_ratio_counts = {6.0, 3.0};
  LossOutput bug = loss_stage_forward({h0.detach(), h1b}, W, local, cfg, 2);
  EXPECT_NEAR(bug.mtp[0].item<double>(), mtp1_sum / 4.0, 1e-14);  // the reported loss is global
  bug.objective.backward();
  EXPECT_NEAR(h1b.grad()[1][0][0].item<double>(), 0.5 * 2.0 * (p[0] + p[2]), 1e-14);
}

TEST(LossTest, AutoScalerIsIdentityForwardAndInjectsScaleBackward) {
  auto h = at::randn({4, 1, 3}, at::kDouble).set_requires_grad(true);
  auto term = at::zeros({1, 4}, at::kDouble).set_requires_grad(true);
  auto y = mtp_loss_auto_scale(h, term, 0.125);
  EXPECT_TRUE(at::equal(y, h));
  (y * 2.0).sum().backward();
  EXPECT_TRUE(at::equal(term.grad(), at::full({1, 4}, 0.125, at::kDouble)));
  EXPECT_TRUE(at::equal(h.grad(), at::full({4, 1, 3}, 2.0, at::kDouble)));
}

TEST(LossTest, CrossEntropyMatchesLogSoftmax) {
  auto logits = at::randn({5, 2, 7}, at::kDouble);
  auto labels = at::randint(0, 7, {2, 5}, at::kLong);
  auto ce = cross_entropy(logits, labels);
  auto ref = -at::log_softmax(logits, -1).gather(-1, labels.t().unsqueeze(-1)).squeeze(-1).t();
  EXPECT_TRUE(at::allclose(ce, ref, 1e-13, 1e-13));
}

TEST(RopeTest, TablesAndRotationFollowRotateHalfConvention) {
  const int64_t s = 5, hn = 8;
  auto rope = rope_tables(s, hn, 10000.0, at::kDouble);
  for (int64_t p = 0; p < s; ++p) {
    for (int64_t d = 0; d < hn; ++d) {
      const double theta = p * std::pow(10000.0, -2.0 * (d % (hn / 2)) / hn);
      EXPECT_NEAR(rope.cos[p][d].item<double>(), std::cos(theta), 1e-12);
      EXPECT_NEAR(rope.sin[p][d].item<double>(), std::sin(theta), 1e-12);
    }
  }
  auto x = at::randn({s, 1, 1, hn}, at::kDouble);
  auto y = apply_rope(x, rope);
  for (int64_t p = 0; p < s; ++p) {
    for (int64_t d = 0; d < hn / 2; ++d) {
      const double theta = p * std::pow(10000.0, -2.0 * d / hn);
      const double a = x[p][0][0][d].item<double>(), b = x[p][0][0][d + hn / 2].item<double>();
      EXPECT_NEAR(y[p][0][0][d].item<double>(), a * std::cos(theta) - b * std::sin(theta), 1e-12);
      EXPECT_NEAR(y[p][0][0][d + hn / 2].item<double>(), b * std::cos(theta) + a * std::sin(theta),
                  1e-12);
    }
  }
}

TEST(AttentionTest, IsCausalBitwise) {
  config::ModelConfig cfg;
  cfg.hidden_size = 8;
  cfg.num_attention_heads = 2;
  cfg.num_query_groups = 1;
  cfg.ffn_hidden_size = 12;
  cfg.seq_length = 6;
  ParamTable params;
  for (const auto& spec : config::parameter_specs(cfg)) {
    if (spec.name.rfind("decoder.layers.0.", 0) == 0) {
      params.add(spec.name, initial_value(spec, 7).to(at::kFloat));
    }
  }
  auto w = LayerWeights::from(params, "decoder.layers.0.", cfg, /*is_moe=*/false);
  auto rope = rope_tables(6, cfg.kv_channels(), cfg.rotary_base, at::kFloat);
  auto x = at::randn({6, 2, 8}, at::kFloat);
  auto x2 = x.clone();
  x2[4] += 1.0;  // change the future (positions ≥ 4)
  auto y = transformer_layer(x, w, cfg, rope);
  auto y2 = transformer_layer(x2, w, cfg, rope);
  EXPECT_TRUE(at::equal(y.narrow(0, 0, 4), y2.narrow(0, 0, 4)));
  EXPECT_FALSE(at::equal(y.narrow(0, 4, 1), y2.narrow(0, 4, 1)));
}

TEST(InitTest, LayoutIndependentPerNameGenerators) {
  config::ModelConfig cfg;
  cfg.mtp_num_layers = 2;
  auto specs = config::parameter_specs(cfg);
  // Canonical order and Megatron names/shapes.
  EXPECT_EQ(specs.front().name, "embedding.word_embeddings.weight");
  EXPECT_EQ(specs.back().name, "output_layer.weight");
  EXPECT_EQ(specs[2].name, "decoder.layers.0.self_attention.linear_qkv.weight");
  EXPECT_EQ(specs[2].shape, (std::vector<int64_t>{3 * 64, 64}));
  std::set<std::string> names;
  for (const auto& s : specs) names.insert(s.name);
  EXPECT_EQ(names.size(), specs.size());
  EXPECT_EQ(specs.size(), 1u + 8 * 6 + 1 + 2 * (3 + 6 + 1) + 1);
  const auto& emb = specs.front();
  auto a = initial_value(emb, 1234), b = initial_value(emb, 1234), c = initial_value(emb, 1235);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, c));
  EXPECT_FALSE(at::equal(a, initial_value(specs.back(), 1234)));
  EXPECT_NEAR(a.mean().item<double>(), 0.0, 0.001);
  EXPECT_NEAR(a.std().item<double>(), 0.02, 0.0005);
  auto fc2 = initial_value(specs[6], 1234);  // decoder.layers.0.mlp.linear_fc2.weight
  EXPECT_EQ(specs[6].name, "decoder.layers.0.mlp.linear_fc2.weight");
  EXPECT_NEAR(fc2.std().item<double>(), 0.02 / 4.0, 0.0003);
  EXPECT_TRUE(at::equal(initial_value(specs[1], 1), at::ones({64}, at::kDouble)));
}

}  // namespace
}  // namespace mtp::model
