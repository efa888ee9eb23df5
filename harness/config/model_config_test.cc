// Tests of ModelConfig: derived values and the rules validate() enforces, each error naming the
// field and the rule.
#include "harness/config/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace mtp::config {
namespace {

void expect_error(const ModelConfig& c, const std::string& needle) {
  try {
    c.validate();
    ADD_FAILURE() << "no error, expected one mentioning " << needle;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ModelConfigTest, DenseRulesNameTheField) {
  ModelConfig base;
  base.validate();
  EXPECT_EQ(base.kv_channels(), 16);
  {
    auto c = base;
    c.hidden_size = 66;
    expect_error(c, "hidden_size = 66 must be divisible by num_attention_heads = 4");
  }
  {
    auto c = base;
    c.num_query_groups = 3;
    expect_error(c, "num_attention_heads = 4 must be divisible by num_query_groups = 3");
  }
  {
    auto c = base;
    c.hidden_size = 12;  // hn = 3: odd
    expect_error(c, "kv_channels = hidden_size / num_attention_heads = 3 must be even");
  }
  {
    auto c = base;
    c.mtp_num_layers = 32;
    expect_error(c, "mtp_num_layers = 32 must be < seq_length = 32");
  }
  {
    auto c = base;
    c.mtp_loss_scaling_factor = -0.1;
    expect_error(c, "mtp_loss_scaling_factor = -0.1 must be finite and >= 0");
  }
  {
    auto c = base;
    c.norm_epsilon = 0.0;
    expect_error(c, "norm_epsilon = 0 must be finite and > 0");
  }
  {
    auto c = base;
    c.vocab_size = 0;
    expect_error(c, "vocab_size = 0 must be >= 1");
  }
}

TEST(MoeConfigTest, DefaultsAreDenseAndKindsFollowMoeLayerFreq) {
  ModelConfig cfg;
  cfg.validate();
  EXPECT_FALSE(cfg.is_moe_layer(0));
  EXPECT_FALSE(cfg.mtp_layer_is_moe());
  cfg.num_moe_experts = 4;
  EXPECT_TRUE(cfg.is_moe_layer(0));  // empty moe_layer_freq: every layer
  EXPECT_TRUE(cfg.mtp_layer_is_moe());
  cfg.moe_layer_freq = {1, 1, 1, 1, 1, 1, 1, 0};
  cfg.validate();
  EXPECT_TRUE(cfg.is_moe_layer(6));
  EXPECT_FALSE(cfg.is_moe_layer(7));
  EXPECT_FALSE(cfg.mtp_layer_is_moe());  // the last decoder layer's kind
  EXPECT_EQ(cfg.moe_expert_ffn_hidden_size(), cfg.ffn_hidden_size);
  cfg.moe_ffn_hidden_size = 32;
  EXPECT_EQ(cfg.moe_expert_ffn_hidden_size(), 32);
}

TEST(MoeConfigTest, ValidateNamesTheBrokenRule) {
  ModelConfig base;
  base.num_moe_experts = 4;
  base.validate();
  {
    auto c = base;
    c.moe_router_topk = 5;
    expect_error(c, "moe_router_topk = 5 must be in 1..num_moe_experts = 4");
  }
  {
    auto c = base;
    c.moe_router_topk = 0;
    expect_error(c, "moe_router_topk");
  }
  {
    auto c = base;
    c.moe_layer_freq = {0, 1};
    expect_error(c, "moe_layer_freq has 2 entries");
  }
  {
    auto c = base;
    c.moe_layer_freq = {0, 1, 1, 1, 1, 1, 1, 2};
    expect_error(c, "moe_layer_freq[7] = 2");
  }
  {
    auto c = base;
    c.moe_router_enable_expert_bias = true;
    c.moe_router_expert_bias = {0.0, 0.1};
    expect_error(c, "moe_router_expert_bias has 2 entries");
  }
  {
    auto c = base;
    c.moe_router_expert_bias = {0.0, 0.1, 0.0, 0.0};
    expect_error(c, "moe_router_enable_expert_bias = false");
  }
  {
    auto c = base;
    c.moe_router_enable_expert_bias = true;
    c.moe_router_expert_bias = {0.0, NAN, 0.0, 0.0};
    expect_error(c, "moe_router_expert_bias[1]");
  }
  {
    auto c = base;
    c.moe_router_topk_scaling_factor = 0.0;
    expect_error(c, "moe_router_topk_scaling_factor");
  }
  {
    auto c = base;
    c.moe_shared_expert_intermediate_size = -1;
    expect_error(c, "moe_shared_expert_intermediate_size");
  }
  {
    ModelConfig c;  // dense
    c.moe_layer_freq = {0, 0, 0, 0, 0, 0, 0, 1};
    expect_error(c, "num_moe_experts = 0");
  }
}

}  // namespace
}  // namespace mtp::config
