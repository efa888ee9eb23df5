#include "candidate/split/split.h"

#include <gtest/gtest.h>

#include "harness/config/testing/tiny_model.h"
#include "harness/engine/testing/random_microbatches.h"
#include "harness/layout/layout.h"
#include "reference/testing/p1_reference_losses.h"

namespace mtp::split {
namespace {

config::ModelConfig tiny() { return config::testing::tiny_model(); }  // N 8, D 2, untied

std::vector<int64_t> shape(int64_t s) { return {s, 2, 16}; }

TEST(SplitLayoutTest, OnlyTheSplitRuleSpreadsDepthsAndEveryOtherRuleStillHolds) {
  const std::string text = "Et|t*3|t|t|t|tm|m|L";  // P 4, V 2: depth 1 on stage 5, 2 on 6
  EXPECT_THROW(layout::build_layout(text, 4, 8, 2), layout::LayoutError);
  try {
    layout::build_layout(text, 4, 8, 2);
  } catch (const layout::LayoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rule R7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("only the split implementation"), std::string::npos);
  }
  const auto l = layout::build_layout(text, 4, 8, 2, layout::MtpRule::kSplit);
  EXPECT_EQ(l.mtp_stages, (std::vector<int>{5, 6}));
  EXPECT_EQ(l.mtp_stage, 5);
  EXPECT_EQ(l.stages[5].mtp_depths, (std::vector<int>{1}));
  EXPECT_EQ(l.stages[6].mtp_depths, (std::vector<int>{2}));
  EXPECT_TRUE(l.mtp_standalone);
  auto rule = [](const std::string& t, int p) {
    try {
      layout::build_layout(t, p, 8, 2, layout::MtpRule::kSplit);
    } catch (const layout::LayoutError& e) {
      const std::string w = e.what();
      const size_t at = w.find("rule R") + 5;
      return w.substr(at, w.find(' ', at) - at);
    }
    return std::string("accepted");
  };
  EXPECT_EQ(rule("Et*4|t*4m|mL", 3), "accepted");
  EXPECT_EQ(rule("Et*4|t*3mt|mL", 3), "R6");       // a 't' after the first 'm' in its stage
  EXPECT_EQ(rule("Et*4|t*3m|t|mL", 2), "R7");      // the MTP stages are not consecutive
  EXPECT_EQ(rule("Et*2|t*3m|mt|t*2L", 4), "R10");  // a 't' in a later MTP stage
  EXPECT_EQ(rule("Et*4|t*4m|m|L", 2), "R8");       // depth 2 in virtual stage 1, depth 1 in 0
  EXPECT_EQ(rule("Et*4|t*4|m|mL", 2), "R9");       // stage 2 is pipeline rank 0
}

TEST(SplitTest, EachMtpStageHoldsItsDepthsAndAnEmbeddingCopy) {
  auto impl = make_split();
  auto cfg = tiny();
  auto init = engine::make_initial_weights(cfg, 3);
  auto layout = layout::build_layout("Et|t*3|t|t|t|tm|m|L", 4, 8, 2, layout::MtpRule::kSplit);
  auto chunks = impl->build_chunks(layout, cfg, init, at::kFloat);
  ASSERT_EQ(chunks.size(), 8u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(chunks[i]->output_shape(), shape(8)) << i;
  EXPECT_EQ(chunks[5]->output_shape(), shape(16));  // cat(h0, h1)
  EXPECT_EQ(chunks[6]->input_shape(), shape(16));
  EXPECT_EQ(chunks[6]->output_shape(), shape(24));  // cat(h0, h1, h2)
  EXPECT_EQ(chunks[7]->input_shape(), shape(24));
  EXPECT_TRUE(chunks[5]->params().has("decoder.final_layernorm.weight"));
  EXPECT_TRUE(chunks[5]->params().has("mtp.layers.0.eh_proj.weight"));
  EXPECT_FALSE(chunks[5]->params().has("mtp.layers.1.eh_proj.weight"));
  EXPECT_TRUE(chunks[6]->params().has("mtp.layers.1.eh_proj.weight"));
  EXPECT_FALSE(chunks[6]->params().has("mtp.layers.0.eh_proj.weight"));
  EXPECT_TRUE(chunks[6]->params().has("embedding.word_embeddings.weight"));
  EXPECT_EQ(impl->embedding_group(layout, cfg), (std::vector<int>{0, 5, 6}));
  auto tied = cfg;
  tied.untie_embeddings = false;
  EXPECT_EQ(impl->embedding_group(layout, tied), (std::vector<int>{0, 5, 6, 7}));
  EXPECT_EQ(impl->describe_stage(layout, 6, cfg), "(embedding copy) m2-2 -> [24, 2, 16]");
}

TEST(SplitTest, SpreadDepthsComputeTheColocatedLossesBitwise) {
  // Depth 1 with the trunk's second half on stage 1, depth 2 with the loss on stage 2: the
  // losses and the objective are bit for bit the reference's at P = 1.
  auto cfg = tiny();
  auto init = engine::make_initial_weights(cfg, 5);
  auto split = make_split()->build_chunks(
      layout::build_layout("Et*4|t*4m|mL", 3, 8, 2, layout::MtpRule::kSplit), cfg, init,
      at::kFloat);
  auto mb = engine::testing::random_microbatches(cfg, 1, 11)[0];
  auto h = split[0]->forward({}, mb).activation.detach();
  auto h01 = split[1]->forward(h, mb).activation.detach();
  ASSERT_EQ(h01.sizes().vec(), shape(16));
  reference::testing::expect_p1_reference_losses(split[2]->forward(h01, mb), cfg, init, mb);
}

}  // namespace
}  // namespace mtp::split
