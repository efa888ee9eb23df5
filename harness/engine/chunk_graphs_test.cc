// Tests of cuda_graphs = true with pipelined layouts (engine/chunk_graphs.h): without CUDA the
// graphs are refused; on a GPU, pipelined steps through the chunk graphs give losses and main
// grads bitwise equal to the eager steps (interleaved 1F1B and 1F1B, both MTP placements, ranks
// as threads), whole runs give bitwise equal records (data parallelism too), and the graphs
// are really captured per slot and replayed. The GPU tests skip without CUDA.
#include "harness/engine/chunk_graphs.h"

#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>

#include "candidate/candidate.h"
#include "harness/common/error.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/testing/random_microbatches.h"
#include "harness/engine/testing/record_runs.h"
#include "harness/engine/trainer.h"
#include "harness/gpu/gpu.h"
#include "harness/record/record.h"
#include "reference/reference.h"

namespace mtp::engine {
namespace {

bool have_cuda() { return gpu::cuda_build() && at::hasCUDA(); }

TEST(ChunkGraphsTest, WithoutCudaTheGraphsAreRefused) {
  if (gpu::cuda_build()) GTEST_SKIP() << "a CUDA build";
  EXPECT_THROW(ChunkGraphs(at::Device(at::kCUDA, 0)), InputError);
  PipelineGraphs graphs(at::Device(at::kCUDA, 0), 8);  // makes nothing yet
  EXPECT_THROW(graphs.stage(0), InputError);
  EXPECT_THROW(graphs.stage(8), InternalError);
}

struct PipelineCase {
  const char* name;
  bool candidate;
  const char* layout;
  int pipeline_size;
};

/// The tiny model's bf16 step on GPU 0 through `c`'s pipeline (ranks as threads), harness
/// kernels: the eager step and three graphed steps from the same weights give the same losses
/// and main grads, bitwise. Step 1 runs each chunk eagerly until its first backward and captures
/// slots after; step 2 captures the slots its warm-up phase needs beyond step 1's (step 1's
/// warm-up forwards were eager and took none); step 3 only replays.
void expect_graphed_steps_equal_eager(const PipelineCase& c,
                                      config::ModelConfig cfg = config::testing::tiny_model()) {
  cfg.kernels = config::Kernels::kHarness;
  config::TrainingConfig training;
  training.dtype = config::DType::kBFloat16;
  training.device = config::Device::kCuda;
  training.num_microbatches = 8;
  config::VariantSpec variant;
  variant.name = c.name;
  variant.implementation =
      c.candidate ? config::Implementation::kCandidate : config::Implementation::kReference;
  variant.layout = c.layout;
  variant.pipeline_size = c.pipeline_size;
  variant.kernels = config::Kernels::kHarness;
  variant.cuda_graphs = true;
  auto impl = c.candidate ? candidate::make_candidate() : reference::make_reference();
  const RunPlan plan = plan_variant(cfg, training, variant, *impl);
  ASSERT_GT(plan.layout.num_stages(), 1);
  const at::Device device(at::kCUDA, 0);
  const InitialWeights init = make_initial_weights(plan.model, 7);
  auto chunks = impl->build_chunks(plan.layout, plan.model, init, at::kBFloat16, device);
  // (stage, weight, fp32 main grad)
  std::vector<std::tuple<int, at::Tensor, at::Tensor>> params;
  for (size_t s = 0; s < chunks.size(); ++s) {
    for (const auto& e : chunks[s]->params().entries()) {
      params.emplace_back(static_cast<int>(s), e.second,
                          at::zeros(e.second.sizes(), e.second.options().dtype(at::kFloat)));
    }
  }
  const std::vector<MicrobatchTensors> mbs =
      testing::random_masked_microbatches_on(plan.model, training.num_microbatches, 100, device);
  auto transport = transport::make_in_process_transport(plan.layout.pipeline_size, {});
  ExecutionOptions exec;
  exec.after_backward = [&params](int stage) {  // Megatron's DDP hook, per stage
    c10::NoGradGuard no_grad;
    for (auto& [s, w, main] : params) {
      if (s != stage || !w.grad().defined()) continue;
      main.add_(w.grad());
      w.mutable_grad().reset();
    }
  };
  auto step = [&](PipelineGraphs* graphs) {
    for (auto& entry : params) std::get<2>(entry).zero_();
    ExecutionOptions e = exec;
    e.pipeline_graphs = graphs;
    const StepLosses l = run_pipeline_step(chunks, plan.layout, plan.schedule, mbs, *transport, e);
    std::vector<at::Tensor> grads;
    for (auto& entry : params) grads.push_back(std::get<2>(entry).cpu());
    return std::make_pair(l, grads);
  };
  const auto eager = step(nullptr);
  PipelineGraphs graphs(device, plan.layout.num_stages());
  ChunkGraphs::Counts after_first{}, after_second{};
  for (int s = 1; s <= 3; ++s) {
    SCOPED_TRACE(std::string(c.name) + ": graphed step " + std::to_string(s));
    const auto got = step(&graphs);
    EXPECT_EQ(got.first.lm, eager.first.lm);
    EXPECT_EQ(got.first.mtp, eager.first.mtp);
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::equal(got.second[i].view(at::kInt), eager.second[i].view(at::kInt)))
          << "main grad " << i << " (stage " << std::get<0>(params[i]) << ") differs in its bits";
    }
    if (s == 1) after_first = graphs.counts();
    if (s == 2) after_second = graphs.counts();
  }
  const ChunkGraphs::Counts n = graphs.counts();
  const int stages = plan.layout.num_stages();
  const int forwards = 3 * stages * static_cast<int>(training.num_microbatches);
  EXPECT_EQ(n.eager + n.captured + n.replayed, forwards);
  EXPECT_GE(n.eager, stages) << "every chunk warms up eagerly";
  EXPECT_EQ(n.eager, after_first.eager) << "only the first step runs eagerly";
  EXPECT_EQ(n.captured, n.slots) << "one capture per slot";
  EXPECT_GE(after_first.slots, stages);
  EXPECT_EQ(n.slots, after_second.slots) << "step 3 made no slot";
  EXPECT_EQ(n.replayed - after_second.replayed, stages * training.num_microbatches)
      << "step 3 only replays";
  // A slot is free again once its backward ran: a chunk never has more slots than the schedule
  // ever holds of its microbatches between forward and backward.
  int in_flight_bound = 0;
  for (int r = 0; r < plan.layout.pipeline_size; ++r) {
    std::vector<int> live(static_cast<size_t>(plan.layout.virtual_size), 0), peak = live;
    for (const schedule::Op& op : schedule::rank_ops(plan.schedule, r)) {
      int& l = live[static_cast<size_t>(op.chunk)];
      l += op.type == schedule::OpType::kForward ? 1 : -1;
      peak[static_cast<size_t>(op.chunk)] = std::max(peak[static_cast<size_t>(op.chunk)], l);
    }
    for (int p : peak) in_flight_bound += p;
  }
  EXPECT_LE(n.slots, in_flight_bound);
  for (const auto& t : eager.second) EXPECT_TRUE(t.abs().sum().item<double>() > 0.0);
}

TEST(ChunkGraphsCudaTest, GraphedPipelinedStepsEqualEagerStepsBitwise_CUDA) {
  if (!have_cuda()) GTEST_SKIP() << "needs a CUDA build and a GPU";
  const PipelineCase cases[] = {
      {"reference_p4v2", false, "E|t*3|(t|)*5mmL", 4},
      {"candidate_p4v2", true, "E|t*3|(t|)*4tmm|L", 4},
      {"candidate_p4_1f1b", true, "Et*2|t*3|t*3mm|L", 4},
  };
  for (const PipelineCase& c : cases) expect_graphed_steps_equal_eager(c);
}

/// A pipelined graphed run gives its memory back once its graphs are destroyed and
/// gpu::release_cached_memory ran (what run_variant and the benchmark do after a graphed run):
/// nothing cached is left, and no live byte more than after the same run before but whole cuBLAS
/// workspaces of LibTorch's (bounded, see below), so that runs and
/// benchmark repetitions one after another in a process do not fill the device (they did:
/// 42 GiB of destroyed graphs' pools after four small-model P4 V2 repetitions on the H100,
/// 2026-12-07). A model wide enough that every slot's pool takes ≥ 20 MiB segments.
TEST(ChunkGraphsCudaTest, DestroyedGraphsGiveTheirMemoryBack_CUDA) {
  if (!have_cuda()) GTEST_SKIP() << "needs a CUDA build and a GPU";
  config::ModelConfig wide = config::testing::tiny_model();
  wide.hidden_size = 256;
  wide.num_attention_heads = 4;
  wide.num_query_groups = 4;
  wide.ffn_hidden_size = 1024;
  wide.seq_length = 256;
  wide.vocab_size = 4096;
  const PipelineCase c{"reference_p4v2_wide", false, "E|t*3|(t|)*5mmL", 4};
  auto lifecycle = [&] {
    expect_graphed_steps_equal_eager(c, wide);
    const gpu::AllocatorBytes held = gpu::allocator_bytes(0);
    gpu::release_cached_memory(0);
    const gpu::AllocatorBytes after = gpu::allocator_bytes(0);
    std::cout << "graphed P4 V2 run: before release allocated " << held.allocated << " reserved "
              << held.reserved << " bytes; after allocated " << after.allocated << " reserved "
              << after.reserved << "\n";
    return after;
  };
  const gpu::AllocatorBytes first = lifecycle();  // lazily made state (cuBLAS workspaces) stays
  const gpu::AllocatorBytes second = lifecycle();
  constexpr int64_t kMiB = int64_t{1} << 20;
  EXPECT_LT(second.reserved - second.allocated, 64 * kMiB)
      << "memory still cached after the release: a destroyed graph's pool was not freed";
  // What a run may leave live: LibTorch's cuBLAS workspaces, one per (cuBLAS handle, stream)
  // pair a GEMM ran on, kept for the process's life (CUBLAS_WORKSPACE_CONFIG=:4096:8: 8 ×
  // 4096 KiB). The graphs' streams are reused (gpu/cuda_graph_cuda.cc) and the handles come
  // from LibTorch's per-thread pool, so the pairs are bounded, but a rank thread may draw another
  // handle than last run's: at most one new workspace per stage's stream. (H100, 2026-12-07: 7
  // new workspaces in the second run, 224 MiB; before the release 2.3 GiB of pools were cached.)
  constexpr int64_t kWorkspace = 8 * 4096 * int64_t{1024};
  const int64_t grown = second.allocated - first.allocated;
  EXPECT_GE(grown, 0);
  EXPECT_EQ(grown % kWorkspace, 0) << grown << " bytes more live: not whole cuBLAS workspaces";
  EXPECT_LE(grown, 8 * kWorkspace) << "more than one new cuBLAS workspace per stage's stream";
}

/// Whole runs, ranks as threads: run_variant with and without cuda_graphs, 3 steps, every
/// tensor of every group of every step bitwise equal (the optimizer updates in place the
/// weights the graphs read), at P4 V2 and at P2 with two data-parallel replicas.
TEST(ChunkGraphsCudaTest, RecordsWithAndWithoutGraphsAreBitwiseEqual_CUDA) {
  if (!have_cuda()) GTEST_SKIP() << "needs a CUDA build and a GPU";
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "mtp_chunk_graphs_test";
  config::TrainingConfig training;
  training.dtype = config::DType::kBFloat16;
  training.device = config::Device::kCuda;
  training.steps = 3;
  training.num_microbatches = 8;
  auto impl = candidate::make_candidate();
  auto run = [&](bool graphs, int pp, int dp, const char* layout, const std::string& name) {
    config::VariantSpec v;
    v.name = name;
    v.implementation = config::Implementation::kCandidate;
    v.kernels = config::Kernels::kHarness;
    v.cuda_graphs = graphs;
    v.pipeline_size = pp;
    v.data_parallel_size = dp;
    v.layout = layout;
    return testing::run_with_record(config::testing::tiny_model(), training, v, *impl, dir);
  };
  struct Shape {
    const char* name;
    int pp, dp;
    const char* layout;
  };
  for (const Shape& sh : {Shape{"p4v2", 4, 1, "E|t*3|(t|)*4tmm|L"}, Shape{"p2_dp2", 2, 2, ""}}) {
    SCOPED_TRACE(sh.name);
    const std::string a = run(false, sh.pp, sh.dp, sh.layout, std::string("eager_") + sh.name);
    const std::string b = run(true, sh.pp, sh.dp, sh.layout, std::string("graphs_") + sh.name);
    EXPECT_GT(testing::expect_records_bitwise_equal(a, b, 3), 100);
    record::RecordReader rb(b);
    EXPECT_EQ(rb.attrs().count("cuda_graphs"), 1u);
  }
}

}  // namespace
}  // namespace mtp::engine
