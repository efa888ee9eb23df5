// Tests of ep > 1 in the planner (engine/plan.cc check_expert_parallel): a variant that breaks a
// precondition of expert parallelism is refused before training, the message naming the
// variant, ep, the rule and this run's value.
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

class ExpertParallelPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = config::testing::tiny_model();
    model_.num_moe_experts = 4;
    model_.moe_router_topk = 2;
    model_.moe_ffn_hidden_size = 8;
    training_ = {};
    variant_ = {};
    variant_.name = "e";
    variant_.implementation = config::Implementation::kReference;
    variant_.pipeline_size = 2;
    variant_.data_parallel_size = 2;
    variant_.expert_parallel_size = 2;
  }
  std::string refusal() const { return testing::plan_refusal(model_, training_, variant_, *impl_); }
  config::ModelConfig model_;
  config::TrainingConfig training_;
  config::VariantSpec variant_;
  std::unique_ptr<Implementation> impl_ = reference::make_reference();
};

TEST_F(ExpertParallelPlanTest, AnMoeVariantPlansWithoutAddingRanks) {
  ASSERT_EQ(refusal(), "");
  const RunPlan plan = plan_variant(model_, training_, variant_, *impl_);
  EXPECT_EQ(plan.expert_parallel_size(), 2);
  EXPECT_EQ(plan.world_size(), 4);  // P 2 x DP 2; EP regroups the DP ranks
  EXPECT_EQ(plan.extra_parallel_sizes(), ", EP 2");
}

TEST_F(ExpertParallelPlanTest, EveryBrokenPreconditionIsNamed) {
  const std::pair<std::function<void()>, std::string> cases[] = {
      {[&] { model_.num_moe_experts = 0; }, "needs an MoE model (num_moe_experts > 0)"},
      {[&] { model_.num_moe_experts = 3; }, "needs num_moe_experts (3) to be a multiple of ep"},
      {[&] { variant_.data_parallel_size = 1; }, "needs dp · cp (1) to be a multiple of ep"},
      {[&] { variant_.optimizer = config::Optimizer::kDistributedAdam; },
       "needs optimizer = \"adam\""},
      {[&] { variant_.accumulation = config::Accumulation::kCanonical; },
       "needs accumulation = \"megatron\""},
      {[&] { model_.moe_layer_freq.assign(static_cast<size_t>(model_.num_layers), 0); },
       "needs at least one MoE layer (moe_layer_freq is all 0)"},
      {[&] { training_.record_copies = true; },
       "needs record_copies off ([training] record_copies = false and no --record-copies)"},
  };
  for (const auto& [break_rule, rule] : cases) {
    SCOPED_TRACE(rule);
    SetUp();
    break_rule();
    const std::string why = refusal();
    EXPECT_THAT(why, HasSubstr("variant \"e\": ep = 2"));
    EXPECT_THAT(why, HasSubstr(rule));
  }
}

}  // namespace
}  // namespace mtp::engine
