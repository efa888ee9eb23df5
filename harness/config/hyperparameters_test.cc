// Tests of the hyperparameter table: unique keys and attributes, the recorded form of every type,
// recorded values read back to the same setting, and each rule's verdict at its boundary.
#include "harness/config/hyperparameters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

namespace mtp::config {
namespace {

/// A MoE model whose every setting differs from the default.
ModelConfig moe_model() {
  ModelConfig c;
  c.num_layers = 3;
  c.hidden_size = 96;
  c.ffn_hidden_size = 200;
  c.num_attention_heads = 6;
  c.num_query_groups = 2;
  c.vocab_size = 300;
  c.seq_length = 17;
  c.micro_batch_size = 3;
  c.mtp_num_layers = 1;
  c.mtp_loss_scaling_factor = 0.3;
  c.rotary_base = 500000.0;
  c.norm_epsilon = 1e-6;
  c.untie_embeddings = false;
  c.kernels = Kernels::kHarness;
  c.num_moe_experts = 4;
  c.moe_router_topk = 3;
  c.moe_ffn_hidden_size = 0;  // recorded as ffn_hidden_size (Megatron's default applied)
  c.moe_shared_expert_intermediate_size = 64;
  c.moe_layer_freq = {0, 1, 1};
  c.moe_router_enable_expert_bias = true;
  c.moe_router_expert_bias = {0.05, -0.1, 0.0, 0.25};
  c.moe_router_topk_scaling_factor = 2.5;
  return c;
}

TEST(HyperparametersTest, KeysAndRecordAttributesAreUnique) {
  std::set<std::string> keys, attrs;
  for (const auto& h : model_hyperparameters()) {
    if (h.key != nullptr) {
      EXPECT_TRUE(keys.insert(h.key).second) << h.key;
    }
    if (h.record_attr != nullptr) {
      EXPECT_TRUE(attrs.insert(h.record_attr).second) << h.record_attr;
    }
  }
  for (const auto& h : training_hyperparameters()) {
    if (h.key != nullptr) {
      EXPECT_TRUE(keys.insert(std::string("t.") + h.key).second) << h.key;
    }
    if (h.record_attr != nullptr) {
      EXPECT_TRUE(attrs.insert(h.record_attr).second) << h.record_attr;
    }
  }
  // 24 scenario keys under [model] (kv_channels and the score function are recorded only).
  EXPECT_EQ(std::count_if(keys.begin(), keys.end(), [](const auto& k) { return k[1] != '.'; }), 24);
}

TEST(HyperparametersTest, RecordedFormsFollowMegatronsAttributes) {
  const ModelConfig c = moe_model();
  auto recorded = [&](const char* attr) { return model_hyperparameter_by_attr(attr)->recorded(c); };
  EXPECT_EQ(std::get<int64_t>(recorded("num_layers")), 3);
  EXPECT_EQ(std::get<int64_t>(recorded("kv_channels")), 16);
  EXPECT_EQ(std::get<int64_t>(recorded("untie_embeddings_and_output_weights")), 0);
  EXPECT_EQ(std::get<int64_t>(recorded("moe_ffn_hidden_size")), 200);
  EXPECT_EQ(std::get<int64_t>(recorded("moe_router_enable_expert_bias")), 1);
  EXPECT_EQ(std::get<double>(recorded("rotary_base")), 500000.0);
  EXPECT_EQ(std::get<std::string>(recorded("kernels")), "harness");
  EXPECT_EQ(std::get<std::string>(recorded("moe_layer_freq")), "[0,1,1]");
  EXPECT_EQ(std::get<std::string>(recorded("moe_router_expert_bias")), "[0.05,-0.1,0,0.25]");
  EXPECT_EQ(std::get<std::string>(recorded("moe_router_score_function")), "sigmoid");
  TrainingConfig t;
  t.seed = 77;
  t.record = RecordMode::kDigest;
  EXPECT_EQ(std::get<int64_t>(training_hyperparameter_by_attr("seed")->recorded(t)), 77);
  EXPECT_EQ(std::get<std::string>(training_hyperparameter_by_attr("record_mode")->recorded(t)),
            "digest");
  EXPECT_TRUE(is_hyperparameter_attr("adam_beta2"));
  EXPECT_FALSE(is_hyperparameter_attr("layout"));
}

TEST(HyperparametersTest, EveryRecordedSettingReadsBackToTheSameModel) {
  const ModelConfig c = moe_model();
  ModelConfig back;
  for (const auto& h : model_hyperparameters()) {
    if (h.record_attr == nullptr || !h.set) continue;
    const auto v = from_recorded(h, h.recorded(c));
    ASSERT_TRUE(v.has_value()) << h.record_attr;
    EXPECT_EQ(h.rule(*v), "") << h.record_attr;
    h.set(back, *v);
  }
  for (const auto& h : model_hyperparameters()) {
    EXPECT_TRUE(h.get(back) == h.get(c)) << h.record_attr;
  }
  EXPECT_EQ(back.moe_ffn_hidden_size, 200);  // the applied width, which trains the same model
}

TEST(HyperparametersTest, RecordedValuesOfTheWrongTypeAreRefused) {
  const auto& layers = *model_hyperparameter_by_attr("num_layers");
  const auto& eps = *model_hyperparameter_by_attr("norm_epsilon");
  const auto& untie = *model_hyperparameter_by_attr("untie_embeddings_and_output_weights");
  const auto& freq = *model_hyperparameter_by_attr("moe_layer_freq");
  EXPECT_FALSE(from_recorded(layers, RecordedValue(std::string("4"))).has_value());
  EXPECT_EQ(std::get<double>(*from_recorded(eps, RecordedValue(int64_t{1}))), 1.0);
  EXPECT_FALSE(from_recorded(untie, RecordedValue(int64_t{2})).has_value());
  EXPECT_FALSE(from_recorded(freq, RecordedValue(std::string("[0,0.5]"))).has_value());
  EXPECT_FALSE(from_recorded(freq, RecordedValue(std::string("[0,nan]"))).has_value());
  EXPECT_FALSE(from_recorded(freq, RecordedValue(std::string("0,1"))).has_value());
  EXPECT_EQ(freq.rule(*from_recorded(freq, RecordedValue(std::string("[0, 1, 2]")))),
            "entries must be 0 (dense) or 1 (MoE)");
  EXPECT_EQ(parse_recorded_list("[]")->size(), 0u);
  EXPECT_FALSE(parse_recorded_list("[1x]").has_value());
}

TEST(HyperparametersTest, RulesDecideAtTheBoundary) {
  auto rule = [](const char* attr, HyperValue v) {
    return training_hyperparameter_by_attr(attr)->rule(v);
  };
  EXPECT_EQ(rule("adam_beta1", 0.0), "");
  EXPECT_EQ(rule("adam_beta1", 1.0), "is not in [0, 1)");
  EXPECT_EQ(rule("adam_eps", 0.0), "is not finite and > 0");
  EXPECT_EQ(rule("clip_grad", -1e-300), "is not finite and >= 0 (0 = clipping off)");
  EXPECT_EQ(rule("lr", std::numeric_limits<double>::quiet_NaN()), "is not finite and >= 0");
  EXPECT_EQ(model_hyperparameter_by_attr("rotary_base")->rule(HUGE_VAL), "is not finite");
  EXPECT_EQ(rule("dtype", std::string("float16")),
            "is not one of \"float32\", \"float64\", \"bfloat16\"");
  const auto* steps = &training_hyperparameters()[0];
  ASSERT_STREQ(steps->key, "steps");
  EXPECT_EQ(steps->rule(int64_t{100000}), "");
  EXPECT_EQ(steps->rule(int64_t{100001}), "must be in [1, 100000]");
  EXPECT_EQ(model_hyperparameter_by_attr("seq_length")->rule(int64_t{1}), "must be >= 2");
}

}  // namespace
}  // namespace mtp::config
