// Tests of sim::costs_from_graphed_stages (graphed_costs.h): node costs read off graphed stage
// times, checked against values computed by hand, the MTP head's noise rule and bad input.

#include "harness/sim/graphed_costs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "harness/common/error.h"

namespace mtp::sim {
namespace {

using ::testing::HasSubstr;

/// The H100 stage times of 2026-12-07 (small model, graphed P4 V2): t 0.285 / 0.639 ms, ttt
/// 0.806 / 1.873, with made-up E, m and L stages.
GraphedStageTimes h100_like() {
  GraphedStageTimes t;
  t.embedding = {0.060, 0.165};
  t.one_layer = {0.285, 0.639};
  t.three_layers = {0.806, 1.873};
  t.mtp_block = {0.350, 0.900};
  t.loss_with_mtp = {0.900, 1.500};
  t.loss_without_mtp = {0.500, 0.800};
  return t;
}

TEST(GraphedCostsTest, NodeCostsAreTheStagesLessTheirFixedPart) {
  std::vector<std::string> notes;
  const auto c = costs_from_graphed_stages(h100_like(), &notes);
  // layer = (ttt − t) / 2; op = t − layer; by hand:
  EXPECT_DOUBLE_EQ(c.at(CostNode::kDecoderDense).forward_ms, (0.806 - 0.285) / 2);   // 0.2605
  EXPECT_DOUBLE_EQ(c.at(CostNode::kDecoderDense).backward_ms, (1.873 - 0.639) / 2);  // 0.617
  const double op_f = 0.285 - (0.806 - 0.285) / 2, op_b = 0.639 - (1.873 - 0.639) / 2;
  EXPECT_DOUBLE_EQ(c.at(CostNode::kChunkOp).forward_ms, op_f);   // 0.0245
  EXPECT_DOUBLE_EQ(c.at(CostNode::kChunkOp).backward_ms, op_b);  // 0.022
  EXPECT_DOUBLE_EQ(c.at(CostNode::kEmbedding).forward_ms, 0.060 - op_f);
  EXPECT_DOUBLE_EQ(c.at(CostNode::kMtpBlockDense).backward_ms, 0.900 - op_b);
  EXPECT_DOUBLE_EQ(c.at(CostNode::kOutputHead).forward_ms, 0.500 - op_f);
  EXPECT_DOUBLE_EQ(c.at(CostNode::kFinalLayernorm).forward_ms, 0.0);
  EXPECT_DOUBLE_EQ(c.at(CostNode::kMtpHead).forward_ms, 0.900 - 0.500);
  EXPECT_DOUBLE_EQ(c.at(CostNode::kMtpHead).backward_ms, 1.500 - 0.800);
  // A dense model: the MoE kinds are the dense ones.
  EXPECT_DOUBLE_EQ(c.at(CostNode::kDecoderMoe).backward_ms,
                   c.at(CostNode::kDecoderDense).backward_ms);
  EXPECT_DOUBLE_EQ(c.at(CostNode::kMtpBlockMoe).forward_ms,
                   c.at(CostNode::kMtpBlockDense).forward_ms);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(c.size(), kAllCostNodes.size());
  // Priced back as the simulator prices a stage (chunk_op + its nodes): a one-layer and a
  // three-layer stage come out as measured.
  EXPECT_NEAR(op_f + c.at(CostNode::kDecoderDense).forward_ms, 0.285, 1e-15);
  EXPECT_NEAR(op_b + 3 * c.at(CostNode::kDecoderDense).backward_ms, 1.873, 1e-15);
}

TEST(GraphedCostsTest, AnMtpHeadUnderAQuarterOfTheLmHeadIsNoise) {
  GraphedStageTimes t = h100_like();
  t.loss_with_mtp = {0.55, 0.70};  // +0.05 forward (under a quarter), −0.10 backward
  std::vector<std::string> notes;
  const auto c = costs_from_graphed_stages(t, &notes);
  EXPECT_DOUBLE_EQ(c.at(CostNode::kMtpHead).forward_ms, c.at(CostNode::kOutputHead).forward_ms);
  EXPECT_DOUBLE_EQ(c.at(CostNode::kMtpHead).backward_ms, c.at(CostNode::kOutputHead).backward_ms);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_THAT(notes[0], HasSubstr("mtp_head forward measured as 0.0500 ms"));
}

TEST(GraphedCostsTest, DifferencesClampAtZeroAndBadTimesAreRefused) {
  GraphedStageTimes t = h100_like();
  t.three_layers = {0.2, 0.5};  // faster than one layer: noise, not a negative layer
  const auto c = costs_from_graphed_stages(t, nullptr);
  EXPECT_EQ(c.at(CostNode::kDecoderDense).forward_ms, 0.0);
  EXPECT_EQ(c.at(CostNode::kChunkOp).forward_ms, 0.285);
  t = h100_like();
  t.mtp_block.backward_ms = NAN;
  try {
    (void)costs_from_graphed_stages(t, nullptr);
    FAIL() << "NaN accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("graphed stage times: m = nan ms"));
  }
  t = h100_like();
  t.embedding.forward_ms = -1.0;
  EXPECT_THROW((void)costs_from_graphed_stages(t, nullptr), InputError);
}

}  // namespace
}  // namespace mtp::sim
