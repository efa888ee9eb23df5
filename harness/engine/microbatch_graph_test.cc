// Tests of cuda_graphs = true (engine/microbatch_graph.h): the planner refuses every variant
// that breaks a precondition, naming the rule; on a GPU the graphed microbatches give records
// bitwise equal to eager ones, and the graph is really replayed (eager once, captured once,
// replayed for every other microbatch). The GPU tests skip without CUDA.
#include "harness/engine/microbatch_graph.h"

#include <c10/core/GradMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>

#include "harness/common/error.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/testing/plan_refusal.h"
#include "harness/engine/testing/random_microbatches.h"
#include "harness/engine/testing/record_runs.h"
#include "harness/engine/trainer.h"
#include "harness/gpu/gpu.h"
#include "harness/record/record.h"
#include "kernels/ops.h"
#include "reference/reference.h"

namespace mtp::engine {
namespace {

using ::testing::HasSubstr;

class CudaGraphsPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = config::testing::tiny_model();
    training_ = {};
    variant_ = {};
    training_.dtype = config::DType::kBFloat16;
    training_.device = config::Device::kCuda;
    variant_.name = "g";
    variant_.implementation = config::Implementation::kReference;
    variant_.pipeline_size = 1;
    variant_.kernels = config::Kernels::kHarness;
    variant_.cuda_graphs = true;
  }
  std::string refusal() const { return testing::plan_refusal(model_, training_, variant_, *impl_); }
  config::ModelConfig model_;
  config::TrainingConfig training_;
  config::VariantSpec variant_;
  std::unique_ptr<Implementation> impl_ = reference::make_reference();
};

TEST_F(CudaGraphsPlanTest, ASingleStageBf16HarnessVariantPlans) {
  EXPECT_EQ(refusal(), "");
  variant_.cuda_graphs = false;
  training_.device = config::Device::kCpu;
  EXPECT_EQ(refusal(), "") << "without cuda_graphs nothing is checked";
}

TEST_F(CudaGraphsPlanTest, PipelinedAndDataParallelVariantsPlan) {
  // engine/chunk_graphs.h: interleaved 1F1B and 1F1B; captures are thread-scoped, so data-
  // parallel ranks as threads plan too.
  variant_.pipeline_size = 4;
  EXPECT_EQ(refusal(), "");
  variant_.schedule = schedule::ScheduleKind::kOneFOneB;
  variant_.layout = "Et*2|t*2|t*2|t*2mmL";
  EXPECT_EQ(refusal(), "");
  variant_.data_parallel_size = 2;
  EXPECT_EQ(refusal(), "");
  SetUp();
  variant_.data_parallel_size = 2;
  EXPECT_EQ(refusal(), "");
}

TEST_F(CudaGraphsPlanTest, EveryBrokenPreconditionIsNamed) {
  // One precondition broken at a time (from the plannable variant of SetUp), and the text that
  // must name it.
  const std::pair<std::function<void()>, std::string> cases[] = {
      {[&] { training_.device = config::Device::kCpu; }, "needs device = \"cuda\" (this run: cpu)"},
      {[&] { training_.dtype = config::DType::kFloat32; },
       "needs dtype = \"bfloat16\" (this run: float32)"},
      {[&] {
         variant_.pipeline_size = 4;
         variant_.schedule = schedule::ScheduleKind::kCombined1F1B;
       },
       "needs a plain schedule, not combined_1f1b"},
      {[&] { variant_.context_parallel_size = 2; }, "needs cp = 1 (this variant: 2)"},
      {[&] { variant_.kernels = config::Kernels::kTorch; }, "needs kernels = \"harness\""},
      {[&] { variant_.accumulation = config::Accumulation::kCanonical; },
       "needs accumulation = \"megatron\": canonical accumulation keeps each microbatch's"},
      {[&] {
         model_.num_moe_experts = 4;
         model_.moe_router_topk = 2;
         model_.moe_ffn_hidden_size = 8;
       },
       "needs a dense model"},
  };
  for (const auto& [break_rule, rule] : cases) {
    SCOPED_TRACE(rule);
    SetUp();
    break_rule();
    const std::string why = refusal();
    EXPECT_THAT(why, HasSubstr("variant \"g\": cuda_graphs = true"));
    EXPECT_THAT(why, HasSubstr(rule));
  }
}

TEST(MicrobatchGraphTest, WithoutCudaTheGraphIsRefused) {
  if (gpu::cuda_build()) GTEST_SKIP() << "a CUDA build";
  EXPECT_THROW(MicrobatchGraph(at::Device(at::kCUDA, 0)), InputError);
}

bool have_cuda() { return gpu::cuda_build() && at::hasCUDA(); }

/// The tiny model's bf16 step on GPU 0, one stage, harness kernels: the eager step and the
/// graphed step from the same weights must give the same losses and main grads, bitwise, for
/// three steps (graph: eager, captured, then replays); weights unchanged between steps, so the
/// steps differ only in the microbatch graph's state.
TEST(MicrobatchGraphCudaTest, GraphedStepsEqualEagerStepsBitwise_CUDA) {
  if (!have_cuda()) GTEST_SKIP() << "needs a CUDA build and a GPU";
  config::ModelConfig cfg = config::testing::tiny_model();
  cfg.kernels = config::Kernels::kHarness;
  config::TrainingConfig training;
  training.dtype = config::DType::kBFloat16;
  training.device = config::Device::kCuda;
  training.num_microbatches = 4;
  config::VariantSpec variant;
  variant.name = "g";
  variant.kernels = config::Kernels::kHarness;
  variant.cuda_graphs = true;
  auto impl = reference::make_reference();
  const RunPlan plan = plan_variant(cfg, training, variant, *impl);
  const at::Device device(at::kCUDA, 0);
  const InitialWeights init = make_initial_weights(plan.model, 7);
  auto chunks = impl->build_chunks(plan.layout, plan.model, init, at::kBFloat16, device);
  ASSERT_EQ(chunks.size(), 1u);
  std::vector<std::pair<at::Tensor, at::Tensor>> params;  // (weight, fp32 main grad)
  for (const auto& e : chunks[0]->params().entries()) {
    params.emplace_back(e.second,
                        at::zeros(e.second.sizes(), e.second.options().dtype(at::kFloat)));
  }
  const std::vector<MicrobatchTensors> mbs =
      testing::random_masked_microbatches_on(plan.model, training.num_microbatches, 100, device);
  auto transport = transport::make_in_process_transport(1, {});
  ExecutionOptions exec;
  exec.after_backward = [&params](int) {
    c10::NoGradGuard no_grad;
    for (auto& [w, main] : params) {
      if (!w.grad().defined()) continue;
      main.add_(w.grad());
      w.mutable_grad().reset();
    }
  };
  // One step: losses and a copy of every main grad (zeroed first).
  auto step = [&](MicrobatchGraph* graph) {
    for (auto& entry : params) entry.second.zero_();
    ExecutionOptions e = exec;
    e.graph = graph;
    const StepLosses l = run_pipeline_step(chunks, plan.layout, plan.schedule, mbs, *transport, e);
    std::vector<at::Tensor> grads;
    for (auto& entry : params) grads.push_back(entry.second.cpu());
    return std::make_pair(l, grads);
  };
  const auto eager = step(nullptr);
  MicrobatchGraph graph(device);
  for (int s = 1; s <= 3; ++s) {
    SCOPED_TRACE("graphed step " + std::to_string(s));
    const auto got = step(&graph);
    EXPECT_EQ(got.first.lm, eager.first.lm);
    EXPECT_EQ(got.first.mtp, eager.first.mtp);
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::equal(got.second[i].view(at::kInt), eager.second[i].view(at::kInt)))
          << "main grad " << i << " differs in its bits";
    }
  }
  EXPECT_EQ(graph.counts().eager, 1);
  EXPECT_EQ(graph.counts().captured, 1);
  EXPECT_EQ(graph.counts().replayed, 3 * 4 - 2);
  for (const auto& t : eager.second) EXPECT_TRUE(t.abs().sum().item<double>() > 0.0);
}

/// Whole runs: run_variant with and without cuda_graphs, 3 steps: every tensor of every group
/// of every step bitwise equal (the optimizer updates the weights the graph reads in place);
/// also with two data-parallel replicas as threads (thread-scoped captures).
TEST(MicrobatchGraphCudaTest, RecordsWithAndWithoutGraphsAreBitwiseEqual_CUDA) {
  if (!have_cuda()) GTEST_SKIP() << "needs a CUDA build and a GPU";
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "mtp_microbatch_graph_test";
  config::TrainingConfig training;
  training.dtype = config::DType::kBFloat16;
  training.device = config::Device::kCuda;
  training.steps = 3;
  training.num_microbatches = 4;
  auto impl = reference::make_reference();
  auto run = [&](bool graphs, bool flash, int dp, const std::string& name) {
    config::VariantSpec v;
    v.name = name;
    v.kernels = config::Kernels::kHarness;
    v.cuda_graphs = graphs;
    v.data_parallel_size = dp;
    if (flash) v.attention_backend = config::AttentionBackend::kFlash;
    return testing::run_with_record(config::testing::tiny_model(), training, v, *impl, dir);
  };
  std::vector<bool> flash{false};
  if (kernels::flash_attention_available()) flash.push_back(true);
  // (flash?, dp): two data-parallel replicas as threads capture their graphs concurrently.
  std::vector<std::pair<bool, int>> cases;
  for (bool f : flash) cases.emplace_back(f, 1);
  cases.emplace_back(flash.back(), 2);
  for (const auto& [f, dp] : cases) {
    const std::string tag = std::string(f ? "flash" : "unfused") + "_dp" + std::to_string(dp);
    SCOPED_TRACE(tag);
    const std::string a = run(false, f, dp, "eager_" + tag);
    const std::string b = run(true, f, dp, "graphs_" + tag);
    EXPECT_GT(testing::expect_records_bitwise_equal(a, b, 3), 100);
    record::RecordReader ra(a), rb(b);
    EXPECT_EQ(rb.attrs().count("cuda_graphs"), 1u);
    EXPECT_EQ(ra.attrs().count("cuda_graphs"), 0u);
  }
}

}  // namespace
}  // namespace mtp::engine
