// Tests of megatron_buffer_layout against layouts derived by hand from Megatron-LM's
// _ParamAndGradBuffer.__init__ (megatron/core/distributed/param_and_grad_buffer.py): reverse
// registration order, 64-element parameter starts and lcm(DP, 128) bucket ends with the
// distributed optimizer, a bucket of its own for the shared embedding, bucket_size splits, and
// DP equal shards per bucket.
#include "harness/engine/buffer_layout.h"

#include <gtest/gtest.h>

#include "candidate/candidate.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/layout/layout.h"

namespace mtp::engine {
namespace {

struct Expected {
  const char* name;
  int64_t start, end;
  int bucket;
};

void expect_ranges(const BufferLayout& l, const std::vector<Expected>& want) {
  ASSERT_EQ(l.params.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(l.params[i].name, want[i].name) << i;
    EXPECT_EQ(l.params[i].start, want[i].start) << want[i].name;
    EXPECT_EQ(l.params[i].end, want[i].end) << want[i].name;
    EXPECT_EQ(l.params[i].bucket, want[i].bucket) << want[i].name;
  }
}

TEST(BufferLayoutTest, HeaderExampleDistributedOptimizer) {
  BufferOptions opt{2, true, 0, false};
  auto l = megatron_buffer_layout({{"a", 100, false}, {"b", 10, false}}, opt);
  expect_ranges(l, {{"b", 0, 10, 0}, {"a", 64, 164, 0}});
  ASSERT_EQ(l.buckets.size(), 1u);
  EXPECT_EQ(l.buckets[0].end, 256);  // lcm(2, 128) = 128
  EXPECT_EQ(l.buckets[0].numel_unpadded, 164);
  EXPECT_EQ(l.shard(0, 0), (std::pair<int64_t, int64_t>{0, 128}));
  EXPECT_EQ(l.shard(0, 1), (std::pair<int64_t, int64_t>{128, 256}));
  // Without the distributed optimizer nothing is padded and a shard is the whole bucket.
  auto plain = megatron_buffer_layout({{"a", 100, false}, {"b", 10, false}}, {2, false, 0, false});
  expect_ranges(plain, {{"b", 0, 10, 0}, {"a", 10, 110, 0}});
  EXPECT_EQ(plain.numel, 110);
  EXPECT_EQ(plain.shard(0, 1), (std::pair<int64_t, int64_t>{0, 110}));
}

TEST(BufferLayoutTest, BucketSizeClosesBucketsAndPadsTheirEnds) {
  // Registration a[100], b[10], c[2000]; buffer order c, b, a. c fills the first bucket
  // (2000 >= 1000): it ends at pad(2000, 128) = 2048; b at 2048; a at pad(2058, 64) = 2112; the
  // last bucket ends at pad(2212, 128) = 2304.
  BufferOptions opt{2, true, 1000, false};
  auto l = megatron_buffer_layout({{"a", 100, false}, {"b", 10, false}, {"c", 2000, false}}, opt);
  expect_ranges(l, {{"c", 0, 2000, 0}, {"b", 2048, 2058, 1}, {"a", 2112, 2212, 1}});
  ASSERT_EQ(l.buckets.size(), 2u);
  EXPECT_EQ(l.buckets[0].end, 2048);
  EXPECT_EQ(l.buckets[0].numel_unpadded, 2000);
  EXPECT_EQ(l.buckets[1].start, 2048);
  EXPECT_EQ(l.buckets[1].end, 2304);
  EXPECT_EQ(l.buckets[1].numel_unpadded, 164);
  EXPECT_EQ(l.numel, 2304);
  EXPECT_EQ(l.numel_unpadded, 2164);
  EXPECT_EQ(l.shard(1, 1), (std::pair<int64_t, int64_t>{2176, 2304}));
  // DP = 3: buckets end at multiples of lcm(3, 128) = 384.
  auto l3 = megatron_buffer_layout({{"a", 100, false}}, {3, true, 0, false});
  EXPECT_EQ(l3.numel, 384);
  EXPECT_EQ(l3.shard(0, 2), (std::pair<int64_t, int64_t>{256, 384}));
  // pad_buckets_for_high_nccl_busbw: lcm(2, 128, 65536).
  auto big = megatron_buffer_layout({{"a", 100, false}}, {2, true, 0, true});
  EXPECT_EQ(big.numel, 65536);
}

TEST(BufferLayoutTest, RegistrationOrderPutsLinearProjBeforeLinearQkv) {
  const std::vector<std::string> canonical{
      "decoder.layers.0.input_layernorm.weight",
      "decoder.layers.0.self_attention.linear_qkv.weight",
      "decoder.layers.0.self_attention.linear_proj.weight",
      "decoder.layers.0.pre_mlp_layernorm.weight",
      "mtp.layers.0.transformer_layer.self_attention.linear_qkv.weight",
      "mtp.layers.0.transformer_layer.self_attention.linear_proj.weight"};
  EXPECT_EQ(megatron_registration_order(canonical),
            (std::vector<std::string>{
                "decoder.layers.0.input_layernorm.weight",
                "decoder.layers.0.self_attention.linear_proj.weight",
                "decoder.layers.0.self_attention.linear_qkv.weight",
                "decoder.layers.0.pre_mlp_layernorm.weight",
                "mtp.layers.0.transformer_layer.self_attention.linear_proj.weight",
                "mtp.layers.0.transformer_layer.self_attention.linear_qkv.weight"}));
}

// The MTP stage of the candidate layout E|t*3|(t|)*4tmm|L (stage 6: embedding copy, decoder layer
// 7, FLN, MTP depths 0 and 1) of a tiny model (H 16, 2 heads, F 24, V 256), DP = 2, distributed
// optimizer. Sizes: norms 16, linear_qkv 48×16 = 768, linear_proj 16×16 = 256, linear_fc1 768,
// linear_fc2 16×24 = 384, eh_proj 16×32 = 512, embedding 256×16 = 4096 (shared_embedding).
TEST(BufferLayoutTest, MtpStageOfATinyModelMatchesTheHandDerivedMegatronLayout) {
  const config::ModelConfig cfg = config::testing::tiny_model();
  auto impl = candidate::make_candidate();
  auto layout = layout::build_layout("E|t*3|(t|)*4tmm|L", 4, 8, 2);
  std::vector<BufferParamSpec> specs;
  for (const auto& name : megatron_registration_order(impl->stage_param_names(layout, 6, cfg))) {
    int64_t numel = 0;
    for (const auto& s : config::parameter_specs(cfg)) {
      if (s.name != name) continue;
      numel = 1;
      for (int64_t d : s.shape) numel *= d;
    }
    specs.push_back({name, numel, name == config::kWordEmbeddingName});
  }
  auto l = megatron_buffer_layout(specs, {2, true, 0, false});
  const std::string m1 = "mtp.layers.1.", m0 = "mtp.layers.0.", t = "transformer_layer.";
  const std::string d7 = "decoder.layers.7.";
  std::vector<std::string> names;
  std::vector<Expected> want = {
      {"", 0, 16, 0},      {"", 64, 448, 0},    {"", 448, 1216, 0},  {"", 1216, 1232, 0},
      {"", 1280, 2048, 0}, {"", 2048, 2304, 0}, {"", 2304, 2320, 0}, {"", 2368, 2880, 0},
      {"", 2880, 2896, 0}, {"", 2944, 2960, 0}, {"", 3008, 3024, 0}, {"", 3072, 3456, 0},
      {"", 3456, 4224, 0}, {"", 4224, 4240, 0}, {"", 4288, 5056, 0}, {"", 5056, 5312, 0},
      {"", 5312, 5328, 0}, {"", 5376, 5888, 0}, {"", 5888, 5904, 0}, {"", 5952, 5968, 0},
      {"", 6016, 6032, 0}, {"", 6080, 6464, 0}, {"", 6464, 7232, 0}, {"", 7232, 7248, 0},
      {"", 7296, 8064, 0}, {"", 8064, 8320, 0}, {"", 8320, 8336, 0}, {"", 8448, 12544, 1}};
  for (const std::string& m : {m1, m0}) {
    for (const char* n :
         {"final_layernorm.weight", "transformer_layer.mlp.linear_fc2.weight",
          "transformer_layer.mlp.linear_fc1.weight", "transformer_layer.pre_mlp_layernorm.weight",
          "transformer_layer.self_attention.linear_qkv.weight",
          "transformer_layer.self_attention.linear_proj.weight",
          "transformer_layer.input_layernorm.weight", "eh_proj.weight", "hnorm.weight",
          "enorm.weight"}) {
      names.push_back(m + n);
    }
  }
  names.push_back("decoder.final_layernorm.weight");
  for (const char* n : {"mlp.linear_fc2.weight", "mlp.linear_fc1.weight",
                        "pre_mlp_layernorm.weight", "self_attention.linear_qkv.weight",
                        "self_attention.linear_proj.weight", "input_layernorm.weight"}) {
    names.push_back(d7 + n);
  }
  names.push_back(config::kWordEmbeddingName);
  ASSERT_EQ(names.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) want[i].name = names[i].c_str();
  expect_ranges(l, want);
  ASSERT_EQ(l.buckets.size(), 2u);
  // The embedding closes bucket 0 at pad(8384, 128) = 8448 and takes [8448, 12544) alone.
  EXPECT_EQ(l.buckets[0].end, 8448);
  EXPECT_EQ(l.buckets[0].numel_unpadded, 8384);
  EXPECT_EQ(l.buckets[1].numel_unpadded, 4096);
  EXPECT_EQ(l.numel, 12544);
  EXPECT_EQ(l.shard(0, 1), (std::pair<int64_t, int64_t>{4224, 8448}));
  EXPECT_EQ(l.shard(1, 0), (std::pair<int64_t, int64_t>{8448, 10496}));
  EXPECT_EQ(l.shard(1, 1), (std::pair<int64_t, int64_t>{10496, 12544}));
}

}  // namespace
}  // namespace mtp::engine
