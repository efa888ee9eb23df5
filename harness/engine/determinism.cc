#include "harness/engine/determinism.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <cstdlib>
#include <mutex>

#include "harness/common/environment.h"
#include "harness/common/error.h"
#include "harness/record/record.h"

namespace mtp::engine {
namespace {

void require_env(const char* name, const char* value) {
  const char* cur = std::getenv(name);
  if (cur == nullptr) {
    setenv(name, value, 1);
  } else if (std::string(cur) != value) {
    throw InputError(
        fmt::format("environment: {}={} conflicts with the deterministic setting {}={}"
                    " (unset it or set it to that value)",
                    name, cur, name, value));
  }
}

}  // namespace

void apply_determinism() {
  static std::once_flag once;
  std::call_once(once, [] {
    require_env("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
    require_env("NCCL_ALGO", "Ring");
    require_env("NCCL_NVLS_ENABLE", "0");
    pin_blas_threads();
    auto& ctx = at::globalContext();
    ctx.setDeterministicAlgorithms(true, /*warn_only=*/false);
#if MTP_TORCH_FILLS_UNINITIALIZED
    // LibTorch >= 2.1 fills every new float tensor with NaN while deterministic algorithms are
    // on (fill_uninitialized_memory), so that an op reading memory it never wrote gives the
    // same bits every run: one extra kernel per allocation (GEMM outputs, grads), ~9 % of the
    // small model's GPU step in the profile of 2026-12-02. Off: no op of the model reads
    // memory it did not write, which DeterminismCudaTest.UninitializedMemoryFillChangesNoBit
    // proves on the GPU (records with the fill on and off, eager and graphed, bitwise equal;
    // the harness kernels' own check: KernelOpsCudaTest.PoisonedMemoryDoesNotReachOutputs).
    ctx.setDeterministicFillUninitializedMemory(false);
#endif
    ctx.setDeterministicCuDNN(true);
    ctx.setBenchmarkCuDNN(false);
    ctx.setAllowTF32CuBLAS(false);
    ctx.setAllowTF32CuDNN(false);
    // LibTorch sends bf16 CPU matrix products to oneDNN when the CPU has AVX-512 (BW, VL, DQ),
    // whatever ISA oneDNN itself is pinned to (DNNL_MAX_CPU_ISA=AVX2, environment.h): oneDNN then
    // has no bf16 kernel to run ("could not create a primitive descriptor iterator"), and where it
    // has one, its bits depend on the CPU. Off, every CPU takes ATen's own bf16 GEMM, compiled
    // for the pinned ATEN_CPU_CAPABILITY.
    ctx.setUserEnabledMkldnn(false);
    try {
      at::set_num_interop_threads(1);
    } catch (const std::exception&) {
      // Already started; the inter-op pool is not used by the harness.
    }
  });
  pin_thread_determinism();
}

void pin_thread_determinism() {
  at::set_num_threads(1);
  MTP_INTERNAL_ASSERT(at::get_num_threads() == 1, "intra-op thread count did not stick at 1");
}

namespace {

/// ATen's CPU kernel set ("AVX2", "AVX512", "NO AVX"; ATEN_CPU_CAPABILITY pins it,
/// environment.h), as at::show_config() reports it (get_cpu_capability is not exported by every
/// LibTorch build).
std::string aten_cpu_capability() {
  const std::string config = at::show_config();
  const std::string key = "CPU capability usage: ";
  const size_t at = config.find(key);
  if (at == std::string::npos) return "unknown";
  const size_t begin = at + key.size();
  return config.substr(begin, config.find('\n', begin) - begin);
}

}  // namespace

std::map<std::string, std::string> determinism_fingerprint() {
  auto env = [](const char* n) {
    const char* v = std::getenv(n);
    return std::string(v ? v : "(unset)");
  };
  auto& ctx = at::globalContext();
  std::map<std::string, std::string> out = environment_fingerprint();
  out["aten_cpu_capability"] = aten_cpu_capability();
  out["hdf5"] = record::hdf5_library_version();
  out.merge(std::map<std::string, std::string> {
    {"torch_version", TORCH_VERSION},
        {"deterministic_algorithms", ctx.deterministicAlgorithms() ? "true" : "false"},
        {"cudnn_deterministic", ctx.deterministicCuDNN() ? "true" : "false"},
#if MTP_TORCH_FILLS_UNINITIALIZED
        {"fill_uninitialized_memory",
         ctx.deterministicFillUninitializedMemory() ? "true" : "false"},
#endif
        {"allow_tf32_cublas", ctx.allowTF32CuBLAS() ? "true" : "false"},
        {"intra_op_threads", std::to_string(at::get_num_threads())},
        {"CUBLAS_WORKSPACE_CONFIG", env("CUBLAS_WORKSPACE_CONFIG")},
        {"NCCL_ALGO", env("NCCL_ALGO")}, {"NCCL_NVLS_ENABLE", env("NCCL_NVLS_ENABLE")},
        {"OMP_NUM_THREADS", env("OMP_NUM_THREADS")},
        {"parallel_info", at::get_parallel_info().substr(0, 400)},
  });
  return out;
}

}  // namespace mtp::engine
