// Tests of build_layout: Megatron's golden answers and layouts (spec §2.3, §2.7, §7.1), the
// validation rules R1–R10, the "Gaps" of spec §2.4, and robustness on arbitrary strings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "harness/layout/layout.h"
#include "harness/layout/test_util.h"

namespace mtp::layout {
namespace {

using test_util::layout_error;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Ids = std::vector<int>;

/// The expected contents of one stage, in stage-index order.
struct Want {
  Ids layers;
  bool embedding = false;
  bool fln = false;
  Ids mtp = {};
  bool loss = false;
};

void expect_stages(const PipelineLayout& l, const std::vector<Want>& want) {
  ASSERT_EQ(l.num_stages(), static_cast<int>(want.size()));
  for (int i = 0; i < l.num_stages(); ++i) {
    SCOPED_TRACE("stage " + std::to_string(i));
    const StagePlan& s = l.stages[i];
    EXPECT_EQ(s.stage_index, i);
    EXPECT_EQ(s.pipeline_rank, i % l.pipeline_size);
    EXPECT_EQ(s.virtual_stage, i / l.pipeline_size);
    EXPECT_EQ(&l.at(s.pipeline_rank, s.virtual_stage), &s);
    EXPECT_EQ(s.decoder_layers, want[i].layers);
    EXPECT_EQ(s.has_embedding, want[i].embedding);
    EXPECT_EQ(s.owns_final_layernorm, want[i].fln);
    EXPECT_EQ(s.mtp_depths, want[i].mtp);
    EXPECT_EQ(s.has_loss, want[i].loss);
  }
}

std::string build_error(const std::string& text, int p, int n, int d) {
  return layout_error([&] { build_layout(text, p, n, d); });
}

// Megatron test_transformer_block.py golden answer (spec §2.3); 1-based there, 0-based here.
TEST(BuildLayoutTest, TransformerBlockGoldenAnswer) {
  const PipelineLayout l = build_layout("E|t|tt|t||t|t|ttL", 4, 8, 0);
  EXPECT_EQ(l.pipeline_size, 4);
  EXPECT_EQ(l.virtual_size, 2);
  const std::vector<std::vector<Ids>> golden = {{{}, {}}, {{0}, {4}}, {{1, 2}, {5}}, {{3}, {6, 7}}};
  for (int p = 0; p < 4; ++p) {
    for (int v = 0; v < 2; ++v) EXPECT_EQ(l.at(p, v).decoder_layers, golden[p][v]) << p << v;
  }
  EXPECT_EQ(l.mtp_stage, -1);
  EXPECT_FALSE(l.mtp_standalone);
  EXPECT_TRUE(l.loss_stage().owns_final_layernorm);  // no MTP: FLN with the loss
  EXPECT_TRUE(l.at(0, 0).has_embedding);
  EXPECT_TRUE(l.at(0, 0).is_first());
}

// Spec §2.7 builder validity cases (N = 7).
TEST(BuildLayoutTest, SpecBuilderValidityCases) {
  const PipelineLayout a = build_layout("Et|t*4|t|tL", 2, 7, 0);
  EXPECT_EQ(a.virtual_size, 2);
  expect_stages(a, {{{0}, true}, {{1, 2, 3, 4}}, {{5}}, {{6}, false, true, {}, true}});
  const PipelineLayout b = build_layout("E|t*7||L", 2, 7, 0);
  expect_stages(b, {{{}, true}, {{0, 1, 2, 3, 4, 5, 6}}, {{}}, {{}, false, true, {}, true}});
  EXPECT_NO_THROW(build_layout("E|t*6|t|L", 2, 7, 0));

  EXPECT_THAT(build_error("t|t*4|t|tL", 2, 7, 0), HasSubstr("rule R2"));  // missing E
  EXPECT_THAT(build_error("Et|t*4|t|t", 2, 7, 0), HasSubstr("rule R3"));  // missing L
  EXPECT_THAT(build_error("Et|t*4|t|tX", 2, 7, 0), HasSubstr("unknown character"));
  EXPECT_THAT(build_error("Et|t*5|tL", 2, 7, 0), HasSubstr("rule R1"));  // 3 stages, P = 2
  EXPECT_THAT(build_error("E|((t|)*3)t|L", 2, 7, 0), HasSubstr("must not be nested"));
}

// The three PR layouts of the spec §2.3 worked-examples table = spec §7.1 #6–#8 (P4, V2, N8, D1).
TEST(BuildLayoutTest, PrLayoutMtpWithLoss) {  // §7.1 #6
  const PipelineLayout l = build_layout("E|t*3|(t|)*5mL", 4, 8, 1);
  EXPECT_EQ(l.virtual_size, 2);
  expect_stages(l, {{{}, true},
                    {{0, 1, 2}},
                    {{3}},
                    {{4}},
                    {{5}},
                    {{6}},
                    {{7}, false, true},
                    {{}, false, false, {1}, true}});
  EXPECT_EQ(l.mtp_stage, 7);
  EXPECT_FALSE(l.mtp_standalone);
}

TEST(BuildLayoutTest, PrLayoutStandaloneWithADecoderLayer) {  // §7.1 #7
  const PipelineLayout l = build_layout("E|t*3|(t|)*4tm|L", 4, 8, 1);
  expect_stages(l, {{{}, true},
                    {{0, 1, 2}},
                    {{3}},
                    {{4}},
                    {{5}},
                    {{6}},
                    {{7}, false, true, {1}},
                    {{}, false, false, {}, true}});
  EXPECT_EQ(l.mtp_stage, 6);
  EXPECT_EQ(l.at(2, 1).stage_index, 6);
  EXPECT_TRUE(l.mtp_standalone);
}

TEST(BuildLayoutTest, PrLayoutStandaloneMtpAlone) {  // §7.1 #8
  const PipelineLayout l = build_layout("E|t*3|(t|)*3tt|m|L", 4, 8, 1);
  expect_stages(l, {{{}, true},
                    {{0, 1, 2}},
                    {{3}},
                    {{4}},
                    {{5}},
                    {{6, 7}, false, true},
                    {{}, false, false, {1}},
                    {{}, false, false, {}, true}});
  EXPECT_EQ(l.mtp_stage, 6);
  EXPECT_TRUE(l.mtp_standalone);
}

// Spec §7.1 #2: [E],[t],[t,t],[t],[],[t],[t],[t,t,m,L] (P4, V2); #4 is the same without m.
TEST(BuildLayoutTest, PipelineLayoutTestNumber2And4) {
  const PipelineLayout l = build_layout("E|t|tt|t||t|t|ttmL", 4, 8, 1);
  expect_stages(
      l,
      {{{}, true}, {{0}}, {{1, 2}}, {{3}}, {{}}, {{4}}, {{5}}, {{6, 7}, false, true, {1}, true}});
  EXPECT_EQ(l.mtp_stage, 7);
  EXPECT_FALSE(l.mtp_standalone);
  EXPECT_TRUE(l.at(0, 1).decoder_layers.empty());

  const PipelineLayout no_mtp = build_layout("E|t|tt|t||t|t|ttL", 4, 8, 0);
  EXPECT_EQ(no_mtp.mtp_stage, -1);
  EXPECT_TRUE(no_mtp.loss_stage().owns_final_layernorm);
}

// Spec §7.1 #3/#5: [E,t×4],[t×4,L], no VPP.
TEST(BuildLayoutTest, PipelineLayoutTestNumber3) {
  const PipelineLayout l = build_layout("Et*4|t*4L", 2, 8, 0);
  EXPECT_EQ(l.virtual_size, 1);
  expect_stages(l, {{{0, 1, 2, 3}, true}, {{4, 5, 6, 7}, false, true, {}, true}});
}

TEST(BuildLayoutTest, DeepSeekV3Like) {
  const PipelineLayout l = build_layout("Et*3|(tt|)*29,m|L", 8, 61, 1);
  EXPECT_EQ(l.num_stages(), 32);
  EXPECT_EQ(l.virtual_size, 4);
  EXPECT_EQ(l.mtp_stage, 30);
  EXPECT_EQ(l.at(6, 3).mtp_depths, Ids{1});
  EXPECT_TRUE(l.at(6, 3).decoder_layers.empty());
  EXPECT_TRUE(l.at(7, 3).has_loss);
  EXPECT_TRUE(l.mtp_standalone);
  EXPECT_EQ(l.at(0, 0).decoder_layers, (Ids{0, 1, 2}));
  EXPECT_EQ(l.at(1, 0).decoder_layers, (Ids{3, 4}));
  EXPECT_EQ(l.at(5, 3).decoder_layers, (Ids{59, 60}));  // stage 29
  EXPECT_TRUE(l.at(5, 3).owns_final_layernorm);
  int fln = 0;
  for (const StagePlan& s : l.stages) fln += s.owns_final_layernorm;
  EXPECT_EQ(fln, 1);
}

// D = 2 versions of the PR layouts (P4, V2, N8).
TEST(BuildLayoutTest, TwoMtpDepths) {
  const PipelineLayout with_loss = build_layout("E|t*3|(t|)*5mmL", 4, 8, 2);
  EXPECT_EQ(with_loss.mtp_stage, 7);
  EXPECT_EQ(with_loss.loss_stage().mtp_depths, (Ids{1, 2}));
  EXPECT_TRUE(with_loss.at(2, 1).owns_final_layernorm);
  EXPECT_FALSE(with_loss.mtp_standalone);

  const PipelineLayout with_t = build_layout("E|t*3|(t|)*4tmm|L", 4, 8, 2);
  EXPECT_EQ(with_t.mtp_stage, 6);
  EXPECT_EQ(with_t.at(2, 1).mtp_depths, (Ids{1, 2}));
  EXPECT_EQ(with_t.at(2, 1).decoder_layers, Ids{7});
  EXPECT_TRUE(with_t.at(2, 1).owns_final_layernorm);
  EXPECT_TRUE(with_t.mtp_standalone);

  const PipelineLayout alone = build_layout("E|t*3|(t|)*3tt|mm|L", 4, 8, 2);
  expect_stages(alone, {{{}, true},
                        {{0, 1, 2}},
                        {{3}},
                        {{4}},
                        {{5}},
                        {{6, 7}, false, true},
                        {{}, false, false, {1, 2}},
                        {{}, false, false, {}, true}});
  EXPECT_TRUE(alone.mtp_standalone);
}

TEST(BuildLayoutTest, StandaloneWithoutVirtualStages) {
  const PipelineLayout l = build_layout("Et*2|t*3|t*3mm|L", 4, 8, 2);
  EXPECT_EQ(l.virtual_size, 1);
  expect_stages(l, {{{0, 1}, true},
                    {{2, 3, 4}},
                    {{5, 6, 7}, false, true, {1, 2}},
                    {{}, false, false, {}, true}});
  EXPECT_EQ(l.mtp_stage, 2);
  EXPECT_TRUE(l.mtp_standalone);
}

TEST(BuildLayoutTest, SingleStage) {  // P = 1: R9 does not apply
  const PipelineLayout l = build_layout("Et*8mmL", 1, 8, 2);
  expect_stages(l, {{{0, 1, 2, 3, 4, 5, 6, 7}, true, true, {1, 2}, true}});
  EXPECT_EQ(l.mtp_stage, 0);
  EXPECT_FALSE(l.mtp_standalone);
  // P = 1 with two virtual stages: MTP with the loss, FLN with layer 7.
  const PipelineLayout v2 = build_layout("Et*4|t*4mL", 1, 8, 1);
  EXPECT_EQ(v2.virtual_size, 2);
  EXPECT_FALSE(v2.mtp_standalone);
  EXPECT_TRUE(v2.at(0, 1).owns_final_layernorm);
}

TEST(BuildLayoutTest, FinalLayernormFollowsLayerNMinus1WithMtp) {
  // The last decoder layer is in the stage before the loss stage: FLN there, not with L.
  const PipelineLayout l = build_layout("Et|tt|t|mL", 2, 4, 1);
  EXPECT_TRUE(l.at(0, 1).owns_final_layernorm);
  EXPECT_FALSE(l.loss_stage().owns_final_layernorm);
  // Without MTP the same split keeps FLN on the loss stage.
  const PipelineLayout no_mtp = build_layout("Et|tt|t|L", 2, 4, 0);
  EXPECT_TRUE(no_mtp.loss_stage().owns_final_layernorm);
  EXPECT_FALSE(no_mtp.at(0, 1).owns_final_layernorm);
}

// Spec §2.4 "Gaps": rules Megatron documents but does not enforce.
TEST(BuildLayoutTest, GapsMegatronDoesNotEnforce) {
  EXPECT_THAT(build_error("Et|t|m|L", 2, 2, 1),
              AllOf(HasSubstr("rule R9"), HasSubstr("stage 2 (p=0, v=1)")));
  EXPECT_THAT(build_error("Ettm|L", 2, 2, 1),
              AllOf(HasSubstr("rule R9"), HasSubstr("stage 0 (p=0, v=0)")));
  EXPECT_THAT(build_error("|Et|tL", 3, 2, 0),
              AllOf(HasSubstr("rule R2"), HasSubstr("'E' at position 1 (item 0 of stage 1 "
                                                    "(p=1, v=0))")));
  EXPECT_THAT(build_error("Et|tL|", 3, 2, 0),
              AllOf(HasSubstr("rule R3"), HasSubstr("'L' at position 4 (item 1 of stage 1 "
                                                    "(p=1, v=0))")));
}

TEST(BuildLayoutTest, RejectsBadArguments) {
  EXPECT_THAT(build_error("EtL", 0, 1, 0), HasSubstr("pipeline_size (P) must be at least 1"));
  EXPECT_THAT(build_error("EL", 1, 0, 0), HasSubstr("num_layers must be at least 1, got 0"));
  EXPECT_THAT(build_error("EtL", 1, 1, -1), HasSubstr("mtp_num_layers must be at least 0"));
}

TEST(BuildLayoutTest, R1StagesMultipleOfP) {
  EXPECT_EQ(build_error("Et|t*5|tL", 2, 7, 0),
            "layout \"Et|t*5|tL\" with P = 2: rule R1 (the number of stages must be a multiple "
            "of P): the layout has 3 stages, which is not a multiple of P = 2");
}

TEST(BuildLayoutTest, R2OneEmbeddingFirstInStage0) {
  EXPECT_EQ(build_error("tE|L", 2, 1, 0),
            "layout \"tE|L\" with P = 2: rule R2 (exactly one 'E', and it is the first item of "
            "stage 0): 'E' at position 1 (item 1 of stage 0 (p=0, v=0)); it must be the first "
            "item of stage 0 (p=0, v=0)");
  EXPECT_THAT(build_error("E|EtL", 2, 1, 0),
              AllOf(HasSubstr("rule R2"),
                    HasSubstr("a second 'E': 'E' at position 2 (item 0 of stage 1 (p=1, v=0))")));
  EXPECT_THAT(build_error("t|L", 2, 1, 0),
              AllOf(HasSubstr("rule R2"), HasSubstr("there is no 'E'")));
}

TEST(BuildLayoutTest, R3OneLossLastInLastStage) {
  EXPECT_EQ(build_error("EtL|t", 2, 2, 0),
            "layout \"EtL|t\" with P = 2: rule R3 (exactly one 'L', and it is the last item of "
            "the last stage): 'L' at position 2 (item 2 of stage 0 (p=0, v=0)); it must be the "
            "last item of stage 1 (p=1, v=0)");
  EXPECT_THAT(build_error("Et|tLt", 2, 3, 0),
              AllOf(HasSubstr("rule R3"), HasSubstr("'L' at position 4 (item 1 of stage 1")));
  EXPECT_THAT(build_error("EL|tL", 2, 1, 0),
              AllOf(HasSubstr("rule R3"), HasSubstr("a second 'L': 'L' at position 4")));
}

TEST(BuildLayoutTest, R4DecoderLayerCount) {
  EXPECT_EQ(build_error("Et|tL", 2, 3, 0),
            "layout \"Et|tL\" with P = 2: rule R4 (the number of 't' must equal num_layers): "
            "the layout has 2 't' but num_layers = 3");
  EXPECT_THAT(build_error("Et|tL", 2, 1, 0),
              HasSubstr("the layout has 2 't' but num_layers = 1; the first one too many is 't' "
                        "at position 3 (item 0 of stage 1 (p=1, v=0))"));
}

TEST(BuildLayoutTest, R5MtpDepthCount) {
  EXPECT_THAT(build_error("Et|tL", 2, 2, 1),
              AllOf(HasSubstr("rule R5 (the number of 'm' must equal mtp_num_layers)"),
                    HasSubstr("the layout has 0 'm' but mtp_num_layers = 1")));
  EXPECT_THAT(build_error("Et|tmmL", 2, 2, 1),
              HasSubstr("the first one too many is 'm' at position 5 (item 2 of stage 1 "
                        "(p=1, v=0))"));
}

TEST(BuildLayoutTest, R6NoDecoderLayerAfterMtp) {
  EXPECT_EQ(build_error("Et|tmtL", 2, 3, 1),
            "layout \"Et|tmtL\" with P = 2: rule R6 (no 't' after the first 'm'): 't' at "
            "position 5 (item 2 of stage 1 (p=1, v=0)) comes after the first 'm' at position 4");
}

TEST(BuildLayoutTest, R7AllMtpInOneStage) {
  EXPECT_EQ(build_error("Et|tm|t|mL", 2, 3, 2),
            "layout \"Et|tm|t|mL\" with P = 2: rule R7 (all 'm' in one stage): 'm' at position "
            "8 (item 0 of stage 3 (p=1, v=1)), but the first 'm' is in stage 1 (p=1, v=0) (only "
            "the split implementation spreads MTP depths over stages)");
}

TEST(BuildLayoutTest, R8MtpInALastVirtualStage) {
  EXPECT_EQ(build_error("Et|tm|t|L", 2, 3, 1),
            "layout \"Et|tm|t|L\" with P = 2: rule R8 (the MTP stage must be a last virtual "
            "stage (v = V-1)): the 'm' at position 4 is in stage 1 (p=1, v=0), but its virtual "
            "stage must be V-1 = 1");
}

TEST(BuildLayoutTest, R9MtpNotOnPipelineRank0) {
  EXPECT_EQ(build_error("Et|t|m|L", 2, 2, 1),
            "layout \"Et|t|m|L\" with P = 2: rule R9 (the MTP stage must not be on pipeline "
            "rank 0 (when P > 1)): the 'm' at position 5 is in stage 2 (p=0, v=1), on pipeline "
            "rank 0");
}

TEST(BuildLayoutTest, R10OnlyLossAfterTheMtpStage) {
  EXPECT_EQ(build_error("E|tm|t|L", 4, 2, 1),
            "layout \"E|tm|t|L\" with P = 4: rule R10 (every stage after the MTP stage is empty "
            "or holds only 'L'): 't' at position 5 (item 0 of stage 2 (p=2, v=0)) comes after "
            "the MTP stage 1 (p=1, v=0)");
}

TEST(BuildLayoutTest, GrammarErrorsPassThrough) {
  EXPECT_THAT(build_error("E|t*|L", 1, 1, 0),
              HasSubstr("position 4: '*' must be followed by a repeat count"));
  EXPECT_THAT(build_error("", 1, 1, 0), HasSubstr("rule R2"));
}

TEST(BuildLayoutTest, AtRejectsOutOfRange) {
  const PipelineLayout l = build_layout("Et|tL", 2, 2, 0);
  EXPECT_THROW(l.at(2, 0), InternalError);
  EXPECT_THROW(l.at(0, 1), InternalError);
  EXPECT_THROW(l.at(-1, 0), InternalError);
  EXPECT_THROW(PipelineLayout{}.at(0, 0), InternalError);
}

// Arbitrary strings either build or throw LayoutError; nothing else escapes.
TEST(BuildLayoutTest, NeverCrashesOnArbitraryStrings) {
  const std::string alphabet = "EEtttmmLL|||**()0123456789,x ";
  std::mt19937 rng(12345);
  int built = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text(rng() % 24, ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    const int p = 1 + static_cast<int>(rng() % 4);
    const int n = 1 + static_cast<int>(rng() % 8);
    const int d = static_cast<int>(rng() % 3);
    try {
      const PipelineLayout l = build_layout(text, p, n, d);
      ++built;
      ASSERT_EQ(l.num_stages(), l.pipeline_size * l.virtual_size) << text;
      (void)format_rank_map(l);
    } catch (const LayoutError& e) {
      ASSERT_THAT(e.what(), HasSubstr("layout \"")) << text;
    }
  }
  for (int iter = 0; iter < 256; ++iter) {  // every byte value
    std::string text = "Et|t";
    text.push_back(static_cast<char>(iter));
    text += "L";
    try {
      build_layout(text, 2, 2, 0);
    } catch (const LayoutError&) {
    }
  }
  SUCCEED() << built << " of 20000 random strings were valid layouts";
}

}  // namespace
}  // namespace mtp::layout
