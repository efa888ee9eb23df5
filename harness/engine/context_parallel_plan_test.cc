// Tests of cp > 1 in the planner (engine/plan.cc check_context_parallel): a variant that breaks a
// precondition of context parallelism is refused before training, the message naming the
// variant, cp, the rule and this run's value; and the planted #3943 fault needs cp >= 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>

#include "harness/common/error.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/engine/plan.h"
#include "harness/engine/testing/plan_refusal.h"
#include "reference/reference.h"

namespace mtp::engine {
namespace {

using ::testing::HasSubstr;

class ContextParallelPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = config::testing::tiny_model();
    model_.seq_length = 16;
    training_ = {};
    variant_ = {};
    variant_.name = "c";
    variant_.implementation = config::Implementation::kReference;
    variant_.pipeline_size = 2;
    variant_.context_parallel_size = 2;
  }
  std::string refusal() const { return testing::plan_refusal(model_, training_, variant_, *impl_); }
  config::ModelConfig model_;
  config::TrainingConfig training_;
  config::VariantSpec variant_;
  std::unique_ptr<Implementation> impl_ = reference::make_reference();
};

TEST_F(ContextParallelPlanTest, ADenseCpuVariantPlansWithTheWorldOfEveryRank) {
  ASSERT_EQ(refusal(), "");
  const RunPlan plan = plan_variant(model_, training_, variant_, *impl_);
  EXPECT_EQ(plan.context_parallel_size(), 2);
  EXPECT_EQ(plan.world_size(), 4);  // P 2 × DP 1 × CP 2
}

TEST_F(ContextParallelPlanTest, EveryBrokenPreconditionIsNamed) {
  const std::pair<std::function<void()>, std::string> cases[] = {
      {[&] { model_.seq_length = 18; },
       "needs seq_length to be a multiple of 2 · cp = 4 (this model: 18)"},
      {[&] { variant_.attention_backend = config::AttentionBackend::kFlash; }, "attention_backend"},
      {[&] { variant_.accumulation = config::Accumulation::kCanonical; },
       "needs accumulation = \"megatron\""},
  };
  for (const auto& [break_rule, rule] : cases) {
    SCOPED_TRACE(rule);
    SetUp();
    break_rule();
    const std::string why = refusal();
    EXPECT_THAT(why, HasSubstr("variant \"c\""));
    EXPECT_THAT(why, HasSubstr(rule));
  }
}

TEST_F(ContextParallelPlanTest, TheMissingCpFactorFaultNeedsContextParallel) {
  variant_.inject = config::Fault::kMtpLossScaleWithoutCp;
  EXPECT_EQ(refusal(), "");
  variant_.context_parallel_size = 1;
  EXPECT_THAT(refusal(), HasSubstr("needs cp >= 2"));
}

}  // namespace
}  // namespace mtp::engine
