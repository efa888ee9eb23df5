#include "candidate/candidate.h"

#include <gtest/gtest.h>

#include "harness/config/testing/tiny_model.h"
#include "harness/engine/testing/random_microbatches.h"
#include "reference/testing/p1_reference_losses.h"

namespace mtp::candidate {
namespace {

config::ModelConfig tiny() { return config::testing::tiny_model(); }  // N 8, D 2, untied

std::vector<int64_t> shape(int64_t s) { return {s, 2, 16}; }

TEST(CandidateTest, StandaloneStagesCarryConcatenatedHiddenStates) {
  auto impl = make_candidate();
  auto cfg = tiny();
  auto init = engine::make_initial_weights(cfg, 3);
  auto layout = layout::build_layout("E|t*3|(t|)*4tmm|L", 4, 8, 2);
  auto chunks = impl->build_chunks(layout, cfg, init, at::kFloat);
  ASSERT_EQ(chunks.size(), 8u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(chunks[i]->output_shape(), shape(8)) << i;
  EXPECT_EQ(chunks[6]->input_shape(), shape(8));
  EXPECT_EQ(chunks[6]->output_shape(), shape(24));  // (1 + D)·s
  EXPECT_EQ(chunks[7]->input_shape(), shape(24));
  // FLN with decoder layer 8 (index 7), MTP and an embedding copy on stage 6, head on stage 7.
  EXPECT_TRUE(chunks[6]->params().has("decoder.final_layernorm.weight"));
  EXPECT_TRUE(chunks[6]->params().has("mtp.layers.0.enorm.weight"));
  EXPECT_TRUE(chunks[6]->params().has("embedding.word_embeddings.weight"));
  EXPECT_TRUE(chunks[7]->params().has("output_layer.weight"));
  EXPECT_FALSE(chunks[7]->params().has("embedding.word_embeddings.weight"));
  EXPECT_EQ(impl->embedding_group(layout, cfg), (std::vector<int>{0, 6}));
  auto tied = cfg;
  tied.untie_embeddings = false;
  EXPECT_EQ(impl->embedding_group(layout, tied), (std::vector<int>{0, 6, 7}));
  // MTP alone in its stage: FLN moves to the stage of layer 8 (stage 5).
  auto alone = layout::build_layout("E|t*3|(t|)*3tt|mm|L", 4, 8, 2);
  auto c2 = impl->build_chunks(alone, cfg, init, at::kFloat);
  EXPECT_TRUE(c2[5]->params().has("decoder.final_layernorm.weight"));
  EXPECT_FALSE(c2[6]->params().has("decoder.final_layernorm.weight"));
  EXPECT_EQ(c2[5]->output_shape(), shape(8));
  EXPECT_EQ(c2[6]->output_shape(), shape(24));
}

TEST(CandidateTest, ForwardOfStandaloneStageMatchesColocatedHiddenStates) {
  // The MTP stage's output is exactly concat(h0, h1, h2) of the co-located computation.
  auto cfg = tiny();
  auto init = engine::make_initial_weights(cfg, 5);
  auto cand = make_candidate()->build_chunks(layout::build_layout("Et*4|t*4mm|L", 3, 8, 2), cfg,
                                             init, at::kFloat);
  auto mb = engine::testing::random_microbatches(cfg, 1, 11)[0];
  auto h = cand[0]->forward({}, mb).activation.detach();
  ASSERT_EQ(h.sizes().vec(), shape(8));
  auto out = cand[1]->forward(h, mb);
  ASSERT_EQ(out.activation.sizes().vec(), shape(24));
  reference::testing::expect_p1_reference_losses(cand[2]->forward(out.activation.detach(), mb), cfg,
                                                 init, mb);
}

}  // namespace
}  // namespace mtp::candidate
