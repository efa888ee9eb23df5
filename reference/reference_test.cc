#include "reference/reference.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/config/testing/tiny_model.h"

namespace mtp::reference {
namespace {

using ::testing::HasSubstr;

config::ModelConfig tiny() { return config::testing::tiny_model(); }  // N 8, D 2, untied

TEST(ReferenceTest, RejectsStandaloneLayoutsNamingTheStage) {
  auto impl = make_reference();
  auto layout = layout::build_layout("E|t*3|(t|)*4tmm|L", 4, 8, 2);
  try {
    impl->check_layout(layout);
    FAIL() << "standalone layout accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("E|t*3|(t|)*4tmm|L"));
    EXPECT_THAT(e.what(), HasSubstr("stage 6 (pipeline rank 2, virtual stage 1)"));
    EXPECT_THAT(e.what(), HasSubstr("candidate"));
  }
  EXPECT_NO_THROW(impl->check_layout(layout::build_layout("E|t*3|(t|)*5mmL", 4, 8, 2)));
}

TEST(ReferenceTest, EmbeddingGroupAndChunkContents) {
  auto impl = make_reference();
  auto cfg = tiny();
  auto layout = layout::build_layout("E|t*3|(t|)*5mmL", 4, 8, 2);
  EXPECT_EQ(impl->embedding_group(layout, cfg), (std::vector<int>{0, 7}));
  EXPECT_EQ(impl->embedding_group(layout::build_layout("Et*8mmL", 1, 8, 2), cfg),
            (std::vector<int>{0}));
  auto init = engine::make_initial_weights(cfg, 3);
  auto chunks = impl->build_chunks(layout, cfg, init, at::kFloat);
  ASSERT_EQ(chunks.size(), 8u);
  // FLN, every MTP depth, the head and an embedding copy live on the loss stage.
  const auto& last = chunks[7]->params();
  EXPECT_TRUE(last.has("decoder.final_layernorm.weight"));
  EXPECT_TRUE(last.has("mtp.layers.1.eh_proj.weight"));
  EXPECT_TRUE(last.has("output_layer.weight"));
  EXPECT_TRUE(last.has("embedding.word_embeddings.weight"));
  EXPECT_FALSE(chunks[6]->params().has("decoder.final_layernorm.weight"));
  EXPECT_TRUE(chunks[6]->params().has("decoder.layers.7.mlp.linear_fc2.weight"));
  // Only [s, b, H] crosses the pipeline.
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ(chunks[i]->output_shape(), (std::vector<int64_t>{8, 2, 16}));
  EXPECT_EQ(chunks[7]->input_shape(), (std::vector<int64_t>{8, 2, 16}));
  EXPECT_TRUE(chunks[7]->output_shape().empty());
  EXPECT_TRUE(chunks[0]->input_shape().empty());
  // Copies start bitwise equal to the owner.
  EXPECT_TRUE(at::equal(chunks[0]->params().get("embedding.word_embeddings.weight"),
                        last.get("embedding.word_embeddings.weight")));
}

}  // namespace
}  // namespace mtp::reference
