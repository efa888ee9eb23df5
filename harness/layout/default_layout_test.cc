// Tests of default_layout: Megatron's even split when no layout string is given.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "harness/layout/layout.h"
#include "harness/layout/test_util.h"

namespace mtp::layout {
namespace {

using test_util::layout_error;
using ::testing::HasSubstr;

void expect_same(const PipelineLayout& a, const PipelineLayout& b) {
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.pipeline_size, b.pipeline_size);
  EXPECT_EQ(a.virtual_size, b.virtual_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.mtp_num_layers, b.mtp_num_layers);
  EXPECT_EQ(a.mtp_stage, b.mtp_stage);
  EXPECT_EQ(a.mtp_standalone, b.mtp_standalone);
  ASSERT_EQ(a.num_stages(), b.num_stages());
  for (int i = 0; i < a.num_stages(); ++i) {
    const StagePlan& x = a.stages[i];
    const StagePlan& y = b.stages[i];
    EXPECT_EQ(x.stage_index, y.stage_index);
    EXPECT_EQ(x.pipeline_rank, y.pipeline_rank);
    EXPECT_EQ(x.virtual_stage, y.virtual_stage);
    EXPECT_EQ(x.decoder_layers, y.decoder_layers);
    EXPECT_EQ(x.mtp_depths, y.mtp_depths);
    EXPECT_EQ(x.has_embedding, y.has_embedding);
    EXPECT_EQ(x.has_loss, y.has_loss);
    EXPECT_EQ(x.owns_final_layernorm, y.owns_final_layernorm);
  }
}

TEST(DefaultLayoutTest, HeaderExample) {
  const PipelineLayout l = default_layout(2, 1, 4, 1);
  EXPECT_EQ(l.text, "Ett|ttmL");
  expect_same(l, build_layout("Ett|ttmL", 2, 4, 1));
  EXPECT_EQ(l.mtp_stage, 1);
  EXPECT_FALSE(l.mtp_standalone);
  EXPECT_TRUE(l.at(1, 0).owns_final_layernorm);
}

// Spec §7.1 #1: (TP1, PP2, VPP1), default split, MTP on the last stage.
TEST(DefaultLayoutTest, PipelineLayoutTestNumber1) {
  const PipelineLayout l = default_layout(2, 1, 8, 1);
  EXPECT_EQ(l.text, "Etttt|ttttmL");
  EXPECT_EQ(l.at(0, 0).decoder_layers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(l.at(1, 0).mtp_depths, (std::vector<int>{1}));
}

TEST(DefaultLayoutTest, VirtualStagesAndNoMtp) {
  const PipelineLayout l = default_layout(4, 2, 8, 2);
  EXPECT_EQ(l.text, "Et|t|t|t|t|t|t|tmmL");
  expect_same(l, build_layout(l.text, 4, 8, 2));
  EXPECT_EQ(l.virtual_size, 2);
  EXPECT_EQ(l.mtp_stage, 7);
  EXPECT_EQ(l.at(2, 1).decoder_layers, (std::vector<int>{6}));

  const PipelineLayout plain = default_layout(1, 1, 3, 0);
  EXPECT_EQ(plain.text, "EtttL");
  EXPECT_EQ(plain.mtp_stage, -1);
  EXPECT_TRUE(plain.loss_stage().owns_final_layernorm);
}

TEST(DefaultLayoutTest, RejectsUnevenSplitsAndBadArguments) {
  EXPECT_EQ(layout_error([] { default_layout(2, 3, 8, 1); }),
            "default layout (P = 2, V = 3, N = 8, D = 1): num_layers must be a multiple of "
            "P·V = 6 to split evenly; give a layout string instead");
  EXPECT_THAT(layout_error([] { default_layout(0, 1, 8, 1); }),
              HasSubstr("pipeline_size (P) must be at least 1"));
  EXPECT_THAT(layout_error([] { default_layout(1, 0, 8, 1); }),
              HasSubstr("virtual_size (V) must be at least 1"));
  EXPECT_THAT(layout_error([] { default_layout(1, 1, 0, 1); }),
              HasSubstr("num_layers must be at least 1"));
  EXPECT_THAT(layout_error([] { default_layout(1, 1, 8, -1); }),
              HasSubstr("mtp_num_layers must be at least 0"));
  EXPECT_THAT(layout_error([] { default_layout(1, 1, 200000, 0); }),
              HasSubstr("would exceed 100000 characters"));
}

}  // namespace
}  // namespace mtp::layout
