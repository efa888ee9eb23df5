// The autograd ops of kernels/ops.h on CUDA tensors against the same ops on CPU tensors: forward
// values and gradients bitwise equal for fp32 and bf16 (within 1e-12 for fp64). Named *_CUDA;
// skips unless mtp_kernels was built with CUDA kernels and a CUDA device is present (CTest label
// gpu).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace mtp::kernels {
namespace {

#define MTP_SKIP_WITHOUT_CUDA_OPS()                                                     \
  do {                                                                                  \
    if (!cuda_kernels_built()) {                                                        \
      GTEST_SKIP() << "mtp_kernels built without CUDA kernels (CPU-only LibTorch)";     \
    }                                                                                   \
    if (!at::hasCUDA()) {                                                               \
      GTEST_SKIP() << "no CUDA device";                                                 \
    }                                                                                   \
  } while (0)

::testing::AssertionResult gpu_matches_cpu(const char* what, const at::Tensor& gpu,
                                           const at::Tensor& cpu) {
  const at::Tensor g = gpu.detach().cpu().contiguous();
  const at::Tensor c = cpu.detach().contiguous();
  if (g.sizes() != c.sizes() || g.scalar_type() != c.scalar_type()) {
    return ::testing::AssertionFailure() << what << ": " << g.sizes() << " " << g.scalar_type()
                                         << " vs " << c.sizes() << " " << c.scalar_type();
  }
  if (c.scalar_type() == at::kDouble) {
    if (at::allclose(g, c, 1e-12, 1e-12)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << what << ": fp64 beyond 1e-12";
  }
  if (std::memcmp(g.data_ptr(), c.data_ptr(), c.nbytes()) == 0) {
    return ::testing::AssertionSuccess();
  }
  const at::Tensor diff = g.to(at::kDouble).ne(c.to(at::kDouble));
  return ::testing::AssertionFailure() << what << ": " << diff.sum().item<int64_t>() << " of "
                                       << c.numel() << " elements differ in value (bitwise "
                                       << "comparison failed)";
}

/// Runs `f` on CPU copies and CUDA copies of `inputs` (those with requires_grad get gradients
/// from Σ out·R), and compares outputs and gradients.
void compare_devices(const char* what, const std::vector<at::Tensor>& inputs,
                     const std::function<at::Tensor(const std::vector<at::Tensor>&)>& f) {
  std::vector<at::Tensor> cpu_in, gpu_in;
  for (const auto& t : inputs) {
    cpu_in.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
    gpu_in.push_back(t.detach().cuda().requires_grad_(t.requires_grad()));
  }
  const at::Tensor out_cpu = f(cpu_in);
  const at::Tensor out_gpu = f(gpu_in);
  EXPECT_TRUE(gpu_matches_cpu((std::string(what) + " forward").c_str(), out_gpu, out_cpu));
  const at::Tensor weights = at::randn(out_cpu.sizes()).to(out_cpu.scalar_type());
  (out_cpu * weights).sum().backward();
  (out_gpu * weights.cuda()).sum().backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].requires_grad()) {
      const std::string name = std::string(what) + " grad " + std::to_string(i);
      EXPECT_TRUE(gpu_matches_cpu(name.c_str(), gpu_in[i].grad(), cpu_in[i].grad()));
    }
  }
}

TEST(KernelOpsCudaTest, OpsMatchCpuOps_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_OPS();
  at::manual_seed(11);
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
    SCOPED_TRACE(c10::toString(dtype));
    const int64_t b = 2, s = 64, vocab = 1000, hidden = 320;
    const at::Tensor ids = at::randint(0, vocab, {b, s}, at::kLong);
    const at::Tensor table = at::randn({vocab, hidden}).to(dtype).requires_grad_(true);
    compare_devices("embedding_lookup", {ids, table}, [](const std::vector<at::Tensor>& in) {
      return embedding_lookup(in[0], in[1]);
    });
    const at::Tensor x = (2 * at::randn({s, b, hidden})).to(dtype).requires_grad_(true);
    const at::Tensor w = (1 + 0.1 * at::randn({hidden})).to(dtype).requires_grad_(true);
    compare_devices("rms_norm", {x, w}, [](const std::vector<at::Tensor>& in) {
      return rms_norm(in[0], in[1], 1e-5);
    });
    const at::Tensor logits = (3 * at::randn({s, b, vocab})).to(dtype).requires_grad_(true);
    const at::Tensor labels = at::randint(0, vocab, {b, s}, at::kLong);
    const at::Tensor mask = (at::rand({b, s}) > 0.25).to(at::kFloat);
    compare_devices("cross_entropy", {logits, labels}, [](const std::vector<at::Tensor>& in) {
      return cross_entropy(in[0], in[1]);
    });
    compare_devices("masked_cross_entropy", {logits, labels, mask},
                    [](const std::vector<at::Tensor>& in) {
                      return masked_cross_entropy(in[0], in[1], in[2]);
                    });
  }
}

}  // namespace
}  // namespace mtp::kernels
