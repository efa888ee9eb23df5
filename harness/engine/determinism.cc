#include "harness/engine/determinism.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <cstdlib>
#include <mutex>

#include "harness/common/error.h"

namespace mtp::engine {
namespace {

void require_env(const char* name, const char* value) {
  const char* cur = std::getenv(name);
  if (cur == nullptr) {
    setenv(name, value, 1);
  } else if (std::string(cur) != value) {
    throw InputError(fmt::format("environment: {}={} conflicts with the deterministic setting {}={}"
                                 " (unset it or set it to that value)", name, cur, name, value));
  }
}

}  // namespace

void apply_determinism() {
  static std::once_flag once;
  std::call_once(once, [] {
    require_env("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
    require_env("NCCL_ALGO", "Ring");
    require_env("NCCL_NVLS_ENABLE", "0");
    auto& ctx = at::globalContext();
    ctx.setDeterministicAlgorithms(true, /*warn_only=*/false);
    ctx.setDeterministicCuDNN(true);
    ctx.setBenchmarkCuDNN(false);
    ctx.setAllowTF32CuBLAS(false);
    ctx.setAllowTF32CuDNN(false);
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

std::map<std::string, std::string> determinism_fingerprint() {
  auto env = [](const char* n) {
    const char* v = std::getenv(n);
    return std::string(v ? v : "(unset)");
  };
  auto& ctx = at::globalContext();
  return {
      {"torch_version", TORCH_VERSION},
      {"deterministic_algorithms", ctx.deterministicAlgorithms() ? "true" : "false"},
      {"cudnn_deterministic", ctx.deterministicCuDNN() ? "true" : "false"},
      {"allow_tf32_cublas", ctx.allowTF32CuBLAS() ? "true" : "false"},
      {"intra_op_threads", std::to_string(at::get_num_threads())},
      {"CUBLAS_WORKSPACE_CONFIG", env("CUBLAS_WORKSPACE_CONFIG")},
      {"NCCL_ALGO", env("NCCL_ALGO")},
      {"NCCL_NVLS_ENABLE", env("NCCL_NVLS_ENABLE")},
      {"OMP_NUM_THREADS", env("OMP_NUM_THREADS")},
      {"parallel_info", at::get_parallel_info().substr(0, 400)},
  };
}

}  // namespace mtp::engine
