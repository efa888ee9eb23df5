// Tests of apply_determinism (engine/determinism.h): every setting it promises is on, the
// fingerprint reports them, and (on a GPU with LibTorch >= 2.1) turning LibTorch's NaN fill of
// new tensors off changes no bit of a run, eager or through CUDA graphs.
#include "harness/engine/determinism.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "candidate/candidate.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/engine/plan.h"
#include "harness/engine/testing/record_runs.h"
#include "harness/engine/trainer.h"
#include "harness/gpu/gpu.h"
#include "harness/record/record.h"
#include "kernels/ops.h"

namespace mtp::engine {
namespace {

TEST(DeterminismTest, SettingsAreOnAndInTheFingerprint) {
  apply_determinism();
  auto& ctx = at::globalContext();
  EXPECT_TRUE(ctx.deterministicAlgorithms());
  EXPECT_FALSE(ctx.deterministicAlgorithmsWarnOnly());
  EXPECT_TRUE(ctx.deterministicCuDNN());
  EXPECT_FALSE(ctx.allowTF32CuBLAS());
  EXPECT_EQ(at::get_num_threads(), 1);
  const auto fp = determinism_fingerprint();
  EXPECT_EQ(fp.at("deterministic_algorithms"), "true");
  EXPECT_EQ(fp.at("CUBLAS_WORKSPACE_CONFIG"), ":4096:8");
#if MTP_TORCH_FILLS_UNINITIALIZED
  EXPECT_FALSE(ctx.deterministicFillUninitializedMemory());
  EXPECT_EQ(fp.at("fill_uninitialized_memory"), "false");
#else
  EXPECT_EQ(fp.count("fill_uninitialized_memory"), 0u) << "LibTorch < 2.1 has no such fill";
#endif
}

#if MTP_TORCH_FILLS_UNINITIALIZED
/// The model's runs read no memory they did not write: the tiny model, bf16, 3 steps, P4 V2
/// with MTP standalone (ranks as threads on GPU 0), eager with LibTorch's kernels and through
/// CUDA graphs with the harness's, each with LibTorch's NaN fill of new tensors on and off:
/// every tensor of every record group bitwise equal between the two. A read of unwritten
/// memory would give NaN with the fill on and the allocator's leftovers without.
TEST(DeterminismCudaTest, UninitializedMemoryFillChangesNoBit_CUDA) {
  if (!gpu::cuda_build() || !at::hasCUDA()) GTEST_SKIP() << "needs a CUDA build and a GPU";
  apply_determinism();
  auto& ctx = at::globalContext();
  // The switch reaches LibTorch: a new CUDA float tensor is NaN with the fill on.
  ctx.setDeterministicFillUninitializedMemory(true);
  EXPECT_TRUE(
      at::empty({64}, at::TensorOptions(at::kCUDA).dtype(at::kFloat)).isnan().all().item<bool>());
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "mtp_determinism_fill_test";
  config::TrainingConfig training;
  training.dtype = config::DType::kBFloat16;
  training.device = config::Device::kCuda;
  training.steps = 3;
  training.num_microbatches = 8;
  auto impl = candidate::make_candidate();
  auto run = [&](bool fill, bool graphs, const std::string& name) {
    ctx.setDeterministicFillUninitializedMemory(fill);
    config::VariantSpec v;
    v.name = name;
    v.implementation = config::Implementation::kCandidate;
    v.pipeline_size = 4;
    v.layout = "E|t*3|(t|)*4tmm|L";
    v.kernels = graphs ? config::Kernels::kHarness : config::Kernels::kTorch;
    v.cuda_graphs = graphs;
    if (kernels::flash_attention_available()) {
      v.attention_backend = config::AttentionBackend::kFlash;
    }
    return testing::run_with_record(config::testing::tiny_model(), training, v, *impl, dir);
  };
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "CUDA graphs, harness kernels" : "eager, LibTorch kernels");
    const std::string tag = graphs ? "graphs" : "eager";
    const std::string on = run(true, graphs, "fill_on_" + tag);
    const std::string off = run(false, graphs, "fill_off_" + tag);
    EXPECT_GT(testing::expect_records_bitwise_equal(on, off, 3), 100);
  }
  ctx.setDeterministicFillUninitializedMemory(false);  // apply_determinism's setting
}
#endif

}  // namespace
}  // namespace mtp::engine
