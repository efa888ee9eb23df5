// model_flops_per_step against Megatron's formula evaluated by hand (model_flops.h).
#include "harness/perf/model_flops.h"

#include <gtest/gtest.h>

#include "harness/common/error.h"

namespace mtp::perf {
namespace {

/// A dense multi-head-attention model of `layers` layers and D = `depths` MTP depths.
config::ModelConfig dense_model(int64_t layers, int64_t hidden, int64_t ffn, int64_t heads,
                                int64_t vocab, int64_t seq, int64_t depths) {
  config::ModelConfig cfg;
  cfg.num_layers = layers;
  cfg.hidden_size = hidden;
  cfg.ffn_hidden_size = ffn;
  cfg.num_attention_heads = heads;
  cfg.num_query_groups = heads;
  cfg.vocab_size = vocab;
  cfg.seq_length = seq;
  cfg.mtp_num_layers = depths;
  return cfg;
}

TEST(ModelFlopsTest, IssueSmallConfig) {
  // 8 layers, H 1024, F 2816, 16 heads (MHA), V 32768, s 2048, D 1; one step of M 8 × b 1.
  // Per token: MLP 1024·3·2816·9 = 77856768; projections (1024·48·64 + 1024·1024)·9 = 37748736;
  // MTP 3072 + 2·1024² = 2100224; logits 1024·32768·2 = 67108864; sum 184814592.
  // × 6 × 16384 tokens = 18168013651968. Attention 6·1024·9·8·2048² = 1855425871872.
  const StepFlops f = model_flops_per_step(dense_model(8, 1024, 2816, 16, 32768, 2048, 1), 8);
  EXPECT_EQ(f.token_linear, 18168013651968.0);
  EXPECT_EQ(f.attention, 1855425871872.0);
  EXPECT_EQ(f.total, 20023439523840.0);
}

TEST(ModelFlopsTest, IssueTinyConfig) {
  // 8 layers, H 64, F 256, 4 heads, V 256, s 32, D 2; one step of M 8 × b 2 = 16 samples.
  // Per token: MLP 64·768·10 = 491520; projections (64·12·16 + 64·64)·10 = 163840; MTP
  // 2·(192 + 8192) = 16768; logits 64·256·3 = 49152; sum 721280, × 6 × 512 = 2215772160.
  // Attention 6·64·10·16·32² = 62914560.
  const StepFlops f = model_flops_per_step(dense_model(8, 64, 256, 4, 256, 32, 2), 16);
  EXPECT_EQ(f.token_linear, 2215772160.0);
  EXPECT_EQ(f.attention, 62914560.0);
}

TEST(ModelFlopsTest, MoeAndGqaLayersByHand) {
  // N 2 (layer 0 dense, layer 1 MoE), D 1 (MoE like the last layer), H 8, 2 heads of 4 in one
  // query group, F 16, 4 experts, top-2, F_moe 4, shared expert 6, V 10, s 4, 3 samples.
  config::ModelConfig cfg = dense_model(2, 8, 16, 2, 10, 4, 1);
  cfg.num_query_groups = 1;
  cfg.num_moe_experts = 4;
  cfg.moe_router_topk = 2;
  cfg.moe_ffn_hidden_size = 4;
  cfg.moe_shared_expert_intermediate_size = 6;
  cfg.moe_layer_freq = {0, 1};
  // Per token: MLP 8·(3·16·1 + (3·4·2 + 3·6)·2) = 1056; projections (8·4·4 + 8·8)·3 = 576;
  // MTP 24 + 128 = 152; logits 8·10·2 = 160; sum 1944, × 6 × 12 tokens = 139968.
  // Attention 6·8·3·3·16 = 6912.
  const StepFlops f = model_flops_per_step(cfg, 3);
  EXPECT_EQ(f.token_linear, 139968.0);
  EXPECT_EQ(f.attention, 6912.0);
  EXPECT_EQ(f.total, 146880.0);
}

TEST(ModelFlopsTest, RejectsBadInput) {
  config::ModelConfig cfg;
  EXPECT_THROW(model_flops_per_step(cfg, 0), InputError);
  cfg.hidden_size = 63;  // not divisible by 4 heads
  EXPECT_THROW(model_flops_per_step(cfg, 1), InputError);
}

}  // namespace
}  // namespace mtp::perf
