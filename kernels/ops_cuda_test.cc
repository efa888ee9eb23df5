// The autograd ops of kernels/ops.h on CUDA tensors against the same ops on CPU tensors: forward
// values and gradients bitwise equal for fp32 and bf16 (within 1e-12 for fp64). Named *_CUDA;
// skips unless mtp_kernels was built with CUDA kernels and a CUDA device is present (CTest label
// gpu). SwiGLU has no CPU kernel (ops.h): its fused op is checked against LibTorch's composite on
// the device, bitwise, forward and backward, in each dtype.
//
// Then the battery of flash_causal_attention (LibTorch's flash kernel, the model's
// attention_backend = "flash"), with deterministic algorithms on as the harness runs: forward
// and q/k/v gradients bitwise repeatable on fresh identical inputs, batch invariance (a sample's
// output and gradients in a batch equal the sample computed alone, bitwise), agreement with a
// float64 CPU reference within a tolerance derived from bf16's epsilon, and poisoned memory
// (LibTorch allocates the outputs: NaN left in the allocator's free blocks must not reach them).
// Named *_CUDA; they skip unless LibTorch >= 2 has CUDA and a device is present. Two CPU tests
// check the float64 reference against autograd and the tolerance against a bf16 model of the
// kernel's roundings.
#include <gtest/gtest.h>

#include <torch/version.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "harness/model/testing/rope_check.h"
#include "kernels/ops.h"
#include "kernels/testing/summary_cases.h"

namespace mtp::kernels {
namespace {

#define MTP_SKIP_WITHOUT_CUDA_OPS()                                                 \
  do {                                                                              \
    if (!cuda_kernels_built()) {                                                    \
      GTEST_SKIP() << "mtp_kernels built without CUDA kernels (CPU-only LibTorch)"; \
    }                                                                               \
    if (!at::hasCUDA()) {                                                           \
      GTEST_SKIP() << "no CUDA device";                                             \
    }                                                                               \
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

/// The model's harness-kernel loss feeds the bf16 logits to cross_entropy directly instead of
/// logits.float() (harness/model/loss.cc head_cross_entropy): the kernel widens each element
/// exactly as it loads it and its backward rounds the fp32 gradient to bf16 as the cast's
/// backward does, so loss and logits gradient must be bitwise the cast path's. On the CPU, and
/// on the GPU where there is one; V = 5000 spans several of the GPU backward's column blocks.
TEST(KernelOpsCudaTest, CrossEntropyOfBf16LogitsIsBitwiseTheFloatCast) {
  at::manual_seed(12);
  const int64_t s = 17, b = 2, vocab = 5000;
  const at::Tensor logits = (4 * at::randn({s, b, vocab})).to(at::kBFloat16);
  const at::Tensor labels = at::randint(0, vocab, {b, s}, at::kLong);
  const at::Tensor upstream = at::randn({b, s});
  std::vector<at::Device> devices{at::kCPU};
  if (cuda_kernels_built() && at::hasCUDA()) devices.emplace_back(at::kCUDA);
  for (const at::Device& d : devices) {
    SCOPED_TRACE(d.str());
    // Two separate leaves (logits.to(kCPU) is logits itself: one shared leaf would compare a
    // gradient with itself).
    const at::Tensor direct = logits.to(d).clone().requires_grad_(true);
    const at::Tensor cast = logits.to(d).clone().requires_grad_(true);
    const at::Tensor ce_direct = cross_entropy(direct, labels.to(d));
    const at::Tensor ce_cast = cross_entropy(cast.to(at::kFloat), labels.to(d));
    ASSERT_EQ(ce_direct.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(ce_direct.cpu().view(at::kInt), ce_cast.cpu().view(at::kInt)))
        << "loss differs in its bits";
    (ce_direct * upstream.to(d)).sum().backward();
    (ce_cast * upstream.to(d)).sum().backward();
    ASSERT_EQ(direct.grad().scalar_type(), at::kBFloat16);
    ASSERT_EQ(cast.grad().scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::equal(direct.grad().cpu().view(at::kShort), cast.grad().cpu().view(at::kShort)))
        << "logits gradient differs in its bits";
    EXPECT_GT(direct.grad().abs().sum().item<double>(), 0.0);
  }
}

/// accumulate_main_grad is add_'s bits: fp32 main grads, bf16 grads, a length that leaves a
/// scalar tail after the 8-wide vectors, and a main grad at an element offset of 2 (no common
/// 16-byte alignment with the grad: the scalar kernel alone); on the CPU it is add_ itself.
TEST(KernelOpsCudaTest, AccumulateMainGradIsAddsBits) {
  at::manual_seed(13);
  std::vector<at::Device> devices{at::kCPU};
  if (cuda_kernels_built() && at::hasCUDA()) devices.emplace_back(at::kCUDA);
  for (const at::Device& d : devices) {
    SCOPED_TRACE(d.str());
    for (const int64_t offset : {0, 2}) {
      const int64_t n = 100003;
      const at::Tensor buffer = (1e3 * at::randn({offset + n})).to(d);
      const at::Tensor grad = at::randn({n}).to(at::kBFloat16).to(d);
      at::Tensor main = buffer.narrow(0, offset, n);  // a view into a buffer, as main grads are
      const at::Tensor expected = main.clone().add_(grad);
      accumulate_main_grad(main, grad);
      EXPECT_TRUE(at::equal(main.cpu().view(at::kInt), expected.cpu().view(at::kInt)))
          << "offset " << offset;
    }
    at::Tensor wrong = at::zeros({3}, at::TensorOptions(d));
    EXPECT_THROW(accumulate_main_grad(wrong, at::zeros({4}, at::TensorOptions(d))), c10::Error);
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
    compare_devices("rms_norm", {x, w},
                    [](const std::vector<at::Tensor>& in) { return rms_norm(in[0], in[1], 1e-5); });
    const at::Tensor logits = (3 * at::randn({s, b, vocab})).to(dtype).requires_grad_(true);
    const at::Tensor labels = at::randint(0, vocab, {b, s}, at::kLong);
    const at::Tensor mask = (at::rand({b, s}) > 0.25).to(at::kFloat);
    compare_devices("cross_entropy", {logits, labels},
                    [](const std::vector<at::Tensor>& in) { return cross_entropy(in[0], in[1]); });
    compare_devices("masked_cross_entropy", {logits, labels, mask},
                    [](const std::vector<at::Tensor>& in) {
                      return masked_cross_entropy(in[0], in[1], in[2]);
                    });
  }
}

TEST(KernelOpsCudaTest, RopeIsBitwiseTheCompositeOnTheGpuAndTheCpu_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_OPS();
  for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    testing::expect_rope_matches_composite(dtype, at::Device(at::kCUDA));
    // The small model's attention shape (s 2048, 16 heads of 64).
    if (dtype == at::kBFloat16) {
      testing::expect_rope_matches_composite(dtype, at::Device(at::kCUDA), 2048, 1, 16, 64, 9);
    }
    const at::Tensor x = at::randn({40, 2, 3, 32}).to(dtype).requires_grad_(true);
    const model::RopeTables t = model::rope_tables(40, 32, 10000.0, dtype);
    compare_devices("rope", {x, t.cos, t.sin},
                    [](const std::vector<at::Tensor>& in) { return rope(in[0], in[1], in[2]); });
  }
}

TEST(KernelOpsCudaTest, CausalAttentionIsTheCpuOpsBits_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_OPS();
  // The tiny benchmark model's shape (b 2, 4 heads, s 32, hn 16) and an odd one.
  for (const std::array<int64_t, 4>& shape :
       {std::array<int64_t, 4>{2, 4, 32, 16}, std::array<int64_t, 4>{3, 2, 45, 24}}) {
    for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " s " + std::to_string(shape[2]));
      const auto make = [&] { return at::randn(shape).to(dtype).requires_grad_(true); };
      const double scale = 1.0 / std::sqrt(static_cast<double>(shape[3]));
      compare_devices("causal_attention", {make(), make(), make()},
                      [scale](const std::vector<at::Tensor>& in) {
                        return causal_attention(in[0], in[1], in[2], scale);
                      });
    }
  }
}

TEST(KernelOpsCudaTest, BlockDigestsOfADeviceTensorEqualTheHostTensors_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_OPS();
  at::manual_seed(12);
  // A non-contiguous view too: the op digests the contiguous bytes, as the record does.
  const at::Tensor big = at::randn({700, 500});
  for (const at::Tensor& t : {big, big.to(at::kBFloat16), big.to(at::kDouble), big.t(),
                              big.narrow(0, 1, 3), at::empty({0}, at::kFloat)}) {
    SCOPED_TRACE(c10::toString(t.scalar_type()) + std::string(" ") + std::to_string(t.numel()));
    const at::Tensor host = block_digests(t, 65536);
    const at::Tensor dev = block_digests(t.to(at::kCUDA), 65536);
    ASSERT_TRUE(dev.is_cuda());
    EXPECT_TRUE(at::equal(host, dev.cpu()));
  }
}

/// block_summaries on the GPU: the CPU's rows bitwise (digests, non-finite counts, first
/// indices and bits) for every floating dtype with non-finite values planted across blocks
/// (several in one block, the last element, a block with none), without any, for a
/// non-contiguous view, an integer tensor whose bits look like +inf, and an empty tensor.
TEST(KernelOpsCudaTest, BlockSummariesOfADeviceTensorEqualTheHostRows_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_OPS();
  at::manual_seed(14);
  const int64_t block = 65536, n = 3 * block + 999;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<at::Tensor> cases;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
    const at::Tensor clean = at::randn({n}).to(dtype);
    at::Tensor dirty = clean.clone();
    dirty[5] = inf;
    dirty[block + 300] = -inf;
    dirty[block + 301] = std::numeric_limits<double>::quiet_NaN();
    dirty[block + 40000] = inf;
    dirty[n - 1] = -inf;  // block 2 holds none
    cases.push_back(clean);
    cases.push_back(dirty);
  }
  cases.push_back(at::randn({700, 500}).t());
  cases.push_back(at::full({100000}, 0x7f800000, at::kInt));
  cases.push_back(at::empty({0}, at::kFloat));
  for (const at::Tensor& t : cases) {
    SCOPED_TRACE(c10::toString(t.scalar_type()) + std::string(" ") + std::to_string(t.numel()));
    const at::Tensor host = block_summaries(t, block);
    const at::Tensor dev = block_summaries(t.to(at::kCUDA), block);
    ASSERT_TRUE(dev.is_cuda());
    ASSERT_EQ(dev.sizes(), host.sizes());
    EXPECT_TRUE(at::equal(host, dev.cpu()));
    if (t.numel() == n && !at::equal(t, t.nan_to_num())) {
      // The planted values, as the CPU rows count them: 1, 3 and 1 in blocks 0, 1 and 3.
      EXPECT_EQ(host.select(1, 2).sum().item<int64_t>(), 5);
      EXPECT_EQ(host[1][3].item<int64_t>(), block + 300);
      EXPECT_EQ(host[2][2].item<int64_t>(), 0);
      EXPECT_EQ(host[2][3].item<int64_t>(), -1);
    }
  }
}

/// block_summaries of a list on the GPU: the CPU batch's rows bitwise, over 154 tensors (22
/// rounds of summary_cases, 132 of them non-empty: three launches of at most 64 spans, the
/// boundaries inside the list), misaligned and transposed views made on the device, and a
/// second run bitwise.
TEST(KernelOpsCudaTest, BlockSummariesOfADeviceListEqualTheHostRows_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_OPS();
  std::vector<at::Tensor> host, dev;
  for (uint64_t round = 0; round < 22; ++round) {
    for (const at::Tensor& t : testing::summary_cases(at::kCPU, 100 + round)) host.push_back(t);
    for (const at::Tensor& t : testing::summary_cases(at::kCUDA, 100 + round)) dev.push_back(t);
  }
  ASSERT_EQ(host.size(), 154u);
  EXPECT_NE(reinterpret_cast<uintptr_t>(dev[6].data_ptr()) % 16, 0u);  // the misaligned view
  const BlockSummaryBatch want = block_summaries(host, 65536);
  const BlockSummaryBatch got = block_summaries(dev, 65536);
  ASSERT_TRUE(got.rows.is_cuda());
  EXPECT_EQ(got.first_row, want.first_row);
  EXPECT_TRUE(at::equal(want.rows, got.rows.cpu()));
  EXPECT_TRUE(at::equal(got.rows, block_summaries(dev, 65536).rows));
  // Each tensor alone (one span, one launch each) gives its rows of the batch.
  for (size_t i : {0u, 6u, 77u, 153u}) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(at::equal(block_summaries(dev[i], 65536).cpu(), want.of(i)));
  }
}

// --- flash attention ---------------------------------------------------------------------------

#define MTP_SKIP_WITHOUT_FLASH()                                                         \
  do {                                                                                   \
    if (!flash_attention_available()) {                                                  \
      GTEST_SKIP() << "flash attention needs a CUDA LibTorch >= 2 (this is LibTorch "    \
                   << TORCH_VERSION << (at::hasCUDA() ? "" : ", no CUDA device") << ")"; \
    }                                                                                    \
  } while (0)

/// DeterministicGuard: deterministic algorithms on (error mode, as the harness runs) for its
/// lifetime; with LibTorch >= 2.1 also fill_uninitialized_memory set to `fill` (LibTorch then
/// fills the outputs it allocates with NaN before the kernel writes them). Restored afterwards.
class DeterministicGuard {
 public:
  explicit DeterministicGuard(bool fill = true)
      : algorithms_(at::globalContext().deterministicAlgorithms()),
        warn_only_(at::globalContext().deterministicAlgorithmsWarnOnly()) {
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
    fill_ = at::globalContext().deterministicFillUninitializedMemory();
    at::globalContext().setDeterministicFillUninitializedMemory(fill);
#else
    (void)fill;
#endif
  }
  ~DeterministicGuard() {
    at::globalContext().setDeterministicAlgorithms(algorithms_, warn_only_);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
    at::globalContext().setDeterministicFillUninitializedMemory(fill_);
#endif
  }
  DeterministicGuard(const DeterministicGuard&) = delete;
  DeterministicGuard& operator=(const DeterministicGuard&) = delete;

 private:
  bool algorithms_, warn_only_;
  bool fill_ = true;
};

/// AttentionShape: q, k, v [b, heads, s, hn].
struct AttentionShape {
  int64_t b, heads, s, hn;
  std::string str() const {
    return "b=" + std::to_string(b) + " heads=" + std::to_string(heads) +
           " s=" + std::to_string(s) + " hn=" + std::to_string(hn);
  }
};

/// AttentionInputs: q, k, v and the output gradient dout, bf16 [b, heads, s, hn] on the CPU,
/// N(0, 1) from a fixed seed.
struct AttentionInputs {
  at::Tensor q, k, v, dout;
  /// Sample `i` alone: [1, heads, s, hn] slices (the same values).
  AttentionInputs sample(int64_t i) const {
    return {q.narrow(0, i, 1).contiguous(), k.narrow(0, i, 1).contiguous(),
            v.narrow(0, i, 1).contiguous(), dout.narrow(0, i, 1).contiguous()};
  }
};

AttentionInputs attention_inputs(const AttentionShape& sh, uint64_t seed) {
  at::manual_seed(seed);
  auto make = [&] { return at::randn({sh.b, sh.heads, sh.s, sh.hn}).to(at::kBFloat16); };
  AttentionInputs in;
  in.q = make();
  in.k = make();
  in.v = make();
  in.dout = make();
  return in;
}

/// The model's softmax scale 1/sqrt(hn) for q [b, heads, s, hn].
double attention_scale(const at::Tensor& q) {
  return 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

/// AttentionResult: the output and the q, k, v gradients of one run, on the CPU.
struct AttentionResult {
  at::Tensor out, dq, dk, dv;
};

/// run_flash: fresh CUDA copies of the inputs (leaves), flash_causal_attention with scale
/// 1/sqrt(hn), backward of Σ out·dout; everything copied back to the CPU.
AttentionResult run_flash(const AttentionInputs& in) {
  at::Tensor q = in.q.cuda().requires_grad_(true);
  at::Tensor k = in.k.cuda().requires_grad_(true);
  at::Tensor v = in.v.cuda().requires_grad_(true);
  const at::Tensor out = flash_causal_attention(q, k, v, attention_scale(in.q));
  out.backward(in.dout.cuda());
  return {out.detach().cpu(), q.grad().cpu(), k.grad().cpu(), v.grad().cpu()};
}

/// Bit patterns of a bf16 tensor, widened to int32 (for comparisons and messages).
at::Tensor bf16_bits(const at::Tensor& t) {
  return t.contiguous().view(at::kShort).to(at::kInt).bitwise_and(0xffff);
}

/// bitwise_same: the same shape and the same bits; on failure the count of differing elements
/// and the first one's position, both values and both bit patterns.
::testing::AssertionResult bitwise_same(const std::string& what, const at::Tensor& a,
                                        const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
    return ::testing::AssertionFailure() << what << ": " << a.sizes() << " " << a.scalar_type()
                                         << " vs " << b.sizes() << " " << b.scalar_type();
  }
  const at::Tensor ab = bf16_bits(a).reshape({-1}), bb = bf16_bits(b).reshape({-1});
  const at::Tensor differ = ab.ne(bb);
  const int64_t n = differ.sum().item<int64_t>();
  if (n == 0) return ::testing::AssertionSuccess();
  const int64_t i = differ.nonzero()[0][0].item<int64_t>();
  std::ostringstream os;
  os << what << ": " << n << " of " << a.numel() << " elements differ (bitwise); first at flat "
     << i << " of " << a.sizes() << ": " << std::setprecision(9) << a.reshape({-1})[i].item<float>()
     << " (0x" << std::hex << ab[i].item<int>() << ") vs " << std::dec
     << b.reshape({-1})[i].item<float>() << " (0x" << std::hex << bb[i].item<int>() << ")";
  return ::testing::AssertionFailure() << os.str();
}

void expect_same_result(const std::string& what, const AttentionResult& a,
                        const AttentionResult& b) {
  EXPECT_TRUE(bitwise_same(what + " out", a.out, b.out));
  EXPECT_TRUE(bitwise_same(what + " dq", a.dq, b.dq));
  EXPECT_TRUE(bitwise_same(what + " dk", a.dk, b.dk));
  EXPECT_TRUE(bitwise_same(what + " dv", a.dv, b.dv));
}

// --- the float64 reference and its tolerance ---------------------------------------------------
//
// Reference: the bf16 inputs widened exactly to float64, on the CPU, straight from the formulas
// (causal mask −∞ above the diagonal, c = 1/sqrt(hn)):
//   S = c·QKᵀ, P = softmax(S), O = PV;  dP = dO·Vᵀ, D = rowsum(dO∘O), dS = P∘(dP − D),
//   dQ = c·dS·K, dK = c·dSᵀ·Q, dV = Pᵀ·dO.
// Tolerance, elementwise |got − ref| ≤ ε·B with ε = 2⁻⁷ (bf16's machine epsilon, twice its unit
// roundoff u = 2⁻⁸). B adds the magnitudes that the kernel's bf16 roundings scale; its fp32
// sums, exponentials and rescalings err ~2⁻²² relative and are covered by the factor ε/u = 2:
//   O:  the output's rounding u|O| and P rounded to bf16 before PV: u·Σⱼ Pᵢⱼ|Vⱼ|
//       → B_O = |O| + P|V|
//   dV: rounding u|dV| and P in bf16 in Pᵀ·dO → B_dV = |dV| + Pᵀ|dO|
//   dQ: rounding u|dQ|; dS rounded to bf16 before dS·K: c·|dS||K|; D computed from the
//       bf16-rounded O: |ΔDᵢ| ≤ u·Σ_d |dOᵢd|(|Oᵢd| + (P|V|)ᵢd) =: u·Eᵢ, entering as Pᵢⱼ·ΔDᵢ
//       → B_dQ = |dQ| + c·(|dS| + P∘E)|K|
//   dK: likewise with the transposes → B_dK = |dK| + c·(|dS| + P∘E)ᵀ|Q|

constexpr double kBf16Epsilon = 0.0078125;  // 2^-7

/// AttentionReference: float64 values and the bounds B of the file comment above.
struct AttentionReference {
  at::Tensor out, dq, dk, dv;
  at::Tensor b_out, b_dq, b_dk, b_dv;
};

at::Tensor causal_mask(int64_t s) {
  return at::ones({s, s}, at::TensorOptions().dtype(at::kBool)).triu(1);
}

AttentionReference attention_reference(const AttentionInputs& in) {
  const at::Tensor q = in.q.to(at::kDouble), k = in.k.to(at::kDouble), v = in.v.to(at::kDouble),
                   dout = in.dout.to(at::kDouble);
  const double c = attention_scale(in.q);
  const at::Tensor scores =
      (at::matmul(q, k.transpose(-2, -1)) * c).masked_fill(causal_mask(q.size(2)), -INFINITY);
  const at::Tensor p = at::softmax(scores, -1);
  AttentionReference r;
  r.out = at::matmul(p, v);
  const at::Tensor dp = at::matmul(dout, v.transpose(-2, -1));
  const at::Tensor d = (dout * r.out).sum(-1, /*keepdim=*/true);
  const at::Tensor ds = p * (dp - d);
  r.dq = at::matmul(ds, k) * c;
  r.dk = at::matmul(ds.transpose(-2, -1), q) * c;
  r.dv = at::matmul(p.transpose(-2, -1), dout);
  const at::Tensor pv_abs = at::matmul(p, v.abs());
  r.b_out = r.out.abs() + pv_abs;
  r.b_dv = r.dv.abs() + at::matmul(p.transpose(-2, -1), dout.abs());
  const at::Tensor e = (dout.abs() * (r.out.abs() + pv_abs)).sum(-1, /*keepdim=*/true);
  const at::Tensor ds_bound = ds.abs() + p * e;
  r.b_dq = r.dq.abs() + at::matmul(ds_bound, k.abs()) * c;
  r.b_dk = r.dk.abs() + at::matmul(ds_bound.transpose(-2, -1), q.abs()) * c;
  return r;
}

/// within_bound: |got − ref| ≤ kBf16Epsilon·bound everywhere (got widened exactly); on failure
/// the count and the worst element. `worst_ratio` receives max |got − ref| / (ε·bound).
::testing::AssertionResult within_bound(const std::string& what, const at::Tensor& got,
                                        const at::Tensor& ref, const at::Tensor& bound,
                                        double* worst_ratio) {
  if (got.sizes() != ref.sizes()) {
    return ::testing::AssertionFailure() << what << ": " << got.sizes() << " vs " << ref.sizes();
  }
  const at::Tensor err = (got.to(at::kDouble) - ref).abs().reshape({-1});
  const at::Tensor tol = (bound * kBf16Epsilon).reshape({-1});
  const at::Tensor ratio = err / tol;
  const int64_t worst = ratio.argmax().item<int64_t>();
  *worst_ratio = ratio[worst].item<double>();
  const int64_t bad = err.gt(tol).sum().item<int64_t>() + err.isnan().sum().item<int64_t>();
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << err.numel() << " elements beyond 2^-7 x bound; worst "
         << "at flat " << worst << ": got " << std::setprecision(17)
         << got.to(at::kDouble).reshape({-1})[worst].item<double>() << ", reference "
         << ref.reshape({-1})[worst].item<double>() << ", bound " << tol[worst].item<double>()
         << " (error/bound " << *worst_ratio << ")";
}

/// Checks out, dq, dk, dv against the reference; prints the worst error/bound ratio of each.
void expect_within_reference(const std::string& what, const AttentionResult& got,
                             const AttentionReference& ref) {
  const std::pair<const char*, std::array<at::Tensor, 3>> parts[] = {
      {"out", {got.out, ref.out, ref.b_out}},
      {"dq", {got.dq, ref.dq, ref.b_dq}},
      {"dk", {got.dk, ref.dk, ref.b_dk}},
      {"dv", {got.dv, ref.dv, ref.b_dv}}};
  for (const auto& [name, t] : parts) {
    double ratio = 0.0;
    EXPECT_TRUE(within_bound(what + " " + name, t[0], t[1], t[2], &ratio));
    std::cout << "  " << what << " " << name << ": max error / (2^-7 x bound) = " << ratio << "\n";
  }
}

/// The unfused composite of harness/model/layers.cc in `dtype` on the CPU with autograd:
/// out and q/k/v gradients of Σ out·dout.
AttentionResult composite_autograd(const AttentionInputs& in, at::ScalarType dtype) {
  at::Tensor q = in.q.to(dtype).requires_grad_(true);
  at::Tensor k = in.k.to(dtype).requires_grad_(true);
  at::Tensor v = in.v.to(dtype).requires_grad_(true);
  const at::Tensor scores = (at::matmul(q, k.transpose(-2, -1)) * attention_scale(in.q))
                                .masked_fill(causal_mask(q.size(2)), -INFINITY);
  const at::Tensor out = at::matmul(at::softmax(scores, -1), v);
  out.backward(in.dout.to(dtype));
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(FlashAttentionReferenceTest, FormulasMatchAutogradInFloat64) {
  // The reference's hand-written gradients against LibTorch's autograd of the same composite.
  const AttentionInputs in = attention_inputs({2, 3, 37, 16}, 5);
  const AttentionReference r = attention_reference(in);
  const AttentionResult a = composite_autograd(in, at::kDouble);
  EXPECT_TRUE(at::allclose(r.out, a.out, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(r.dq, a.dq, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(r.dk, a.dk, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(r.dv, a.dv, 1e-12, 1e-12));
}

TEST(FlashAttentionReferenceTest, ToleranceCoversABf16ModelOfTheKernel) {
  // The flash kernel's roundings, modelled on the CPU in fp32: P and dS rounded to bf16 before
  // their GEMMs, O, dQ, dK, dV rounded to bf16, D from the rounded O. Such a kernel must pass
  // the tolerance the GPU test applies, and its error must be of the tolerance's order (not
  // far below it: the bound is not loose by orders of magnitude).
  const AttentionInputs in = attention_inputs({2, 4, 256, 64}, 6);
  const at::Tensor q = in.q.to(at::kFloat), k = in.k.to(at::kFloat), v = in.v.to(at::kFloat),
                   dout = in.dout.to(at::kFloat);
  const double c = attention_scale(in.q);
  auto bf16 = [](const at::Tensor& t) { return t.to(at::kBFloat16).to(at::kFloat); };
  const at::Tensor p = at::softmax(
      (at::matmul(q, k.transpose(-2, -1)) * c).masked_fill(causal_mask(q.size(2)), -INFINITY), -1);
  AttentionResult m;
  m.out = bf16(at::matmul(bf16(p), v));
  const at::Tensor d = (dout * m.out).sum(-1, /*keepdim=*/true);
  const at::Tensor ds = bf16(p * (at::matmul(dout, v.transpose(-2, -1)) - d));
  m.dq = bf16(at::matmul(ds, k) * c);
  m.dk = bf16(at::matmul(ds.transpose(-2, -1), q) * c);
  m.dv = bf16(at::matmul(bf16(p).transpose(-2, -1), dout));
  const AttentionReference r = attention_reference(in);
  const std::pair<const char*, std::array<at::Tensor, 3>> parts[] = {
      {"out", {m.out, r.out, r.b_out}},
      {"dq", {m.dq, r.dq, r.b_dq}},
      {"dk", {m.dk, r.dk, r.b_dk}},
      {"dv", {m.dv, r.dv, r.b_dv}}};
  for (const auto& [name, t] : parts) {
    double ratio = 0.0;
    EXPECT_TRUE(within_bound(std::string("bf16 model ") + name, t[0], t[1], t[2], &ratio));
    EXPECT_GT(ratio, 0.05) << name << ": the bound is far looser than bf16 rounding";
    std::cout << "  bf16 model " << name << ": max error / (2^-7 x bound) = " << ratio << "\n";
  }
}

TEST(FlashAttentionCudaTest, BitwiseRepeatableOnFreshInputs_CUDA) {
  MTP_SKIP_WITHOUT_FLASH();
  DeterministicGuard det;
  // The small model's microbatch (b 1, 16 heads of 64, s 2048), the tiny one's (b 2, 4 heads of
  // 16, s 32), and an odd shape.
  for (const AttentionShape& sh : {AttentionShape{1, 16, 2048, 64}, AttentionShape{2, 4, 32, 16},
                                   AttentionShape{3, 5, 300, 64}}) {
    SCOPED_TRACE(sh.str());
    const AttentionInputs in = attention_inputs(sh, 1);
    const AttentionResult first = run_flash(in);
    for (int rep = 1; rep < 5; ++rep) {
      // Fresh host tensors with the same values, then fresh device copies in run_flash.
      const AttentionInputs again = attention_inputs(sh, 1);
      expect_same_result("repeat " + std::to_string(rep), run_flash(again), first);
    }
  }
}

TEST(FlashAttentionCudaTest, SampleInABatchEqualsTheSampleAlone_CUDA) {
  MTP_SKIP_WITHOUT_FLASH();
  DeterministicGuard det;
  const std::pair<AttentionShape, std::vector<int64_t>> cases[] = {
      {{8, 16, 2048, 64}, {0, 3, 7}},  // the small model's 8 microbatches as one batch
      {{2, 4, 32, 16}, {0, 1}},        // the tiny model's microbatch
      {{4, 4, 128, 64}, {0, 2, 3}}};
  for (const auto& [sh, rows] : cases) {
    SCOPED_TRACE(sh.str());
    const AttentionInputs in = attention_inputs(sh, 2);
    const AttentionResult all = run_flash(in);
    for (int64_t i : rows) {
      const AttentionResult one = run_flash(in.sample(i));
      const AttentionResult row{all.out.narrow(0, i, 1), all.dq.narrow(0, i, 1),
                                all.dk.narrow(0, i, 1), all.dv.narrow(0, i, 1)};
      expect_same_result("sample " + std::to_string(i) + " of " + std::to_string(sh.b), row, one);
    }
  }
}

TEST(FlashAttentionCudaTest, MatchesFloat64ReferenceWithinBf16Tolerance_CUDA) {
  MTP_SKIP_WITHOUT_FLASH();
  DeterministicGuard det;
  for (const AttentionShape& sh : {AttentionShape{2, 4, 256, 64}, AttentionShape{1, 3, 200, 16},
                                   AttentionShape{1, 4, 1024, 64}}) {
    SCOPED_TRACE(sh.str());
    const AttentionInputs in = attention_inputs(sh, 3);
    expect_within_reference(sh.str(), run_flash(in), attention_reference(in));
  }
}

/// poison_allocator: fills free memory of the CUDA caching allocator with `byte`: a large
/// block of `bytes` and 512 blocks of 256 KiB (its small-allocation pool) are allocated, filled
/// and freed, so that the next allocations (the op's outputs and workspaces) reuse them.
void poison_allocator(unsigned char byte, int64_t bytes) {
  const auto opts = at::TensorOptions().dtype(at::kByte).device(at::kCUDA);
  std::vector<at::Tensor> blocks{at::empty({bytes}, opts)};
  for (int i = 0; i < 512; ++i) blocks.push_back(at::empty({256 << 10}, opts));
  for (at::Tensor& t : blocks) t.fill_(static_cast<int64_t>(byte));
}

TEST(FlashAttentionCudaTest, PoisonedMemoryDoesNotLeak_CUDA) {
  MTP_SKIP_WITHOUT_FLASH();
  // LibTorch's own NaN fill of new outputs off, so that what the outputs start from is the
  // allocator's free memory: NaN (0xff) in one run, zeros in the other.
  DeterministicGuard det(/*fill=*/false);
  for (const AttentionShape& sh :
       {AttentionShape{1, 16, 2048, 64}, AttentionShape{3, 5, 300, 64}}) {
    SCOPED_TRACE(sh.str());
    const AttentionInputs in = attention_inputs(sh, 4);
    // Check that the poison reaches new allocations (else this test could not fail).
    poison_allocator(0xff, int64_t{512} << 20);
    EXPECT_TRUE(at::empty({sh.b, sh.heads, sh.s, sh.hn},
                          at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA))
                    .isnan()
                    .any()
                    .item<bool>())
        << "the allocator did not hand out poisoned memory";
    poison_allocator(0xff, int64_t{512} << 20);
    const AttentionResult poisoned = run_flash(in);
    poison_allocator(0x00, int64_t{512} << 20);
    const AttentionResult clean = run_flash(in);
    for (const at::Tensor& t : {poisoned.out, poisoned.dq, poisoned.dk, poisoned.dv}) {
      EXPECT_FALSE(t.isnan().any().item<bool>()) << "NaN from poisoned memory in an output";
    }
    expect_same_result("poisoned vs clean", poisoned, clean);
  }
}

/// The first element where `a` and `b` (same shape and dtype) differ in bits, with both bit
/// patterns, or "" when they are bitwise equal.
std::string first_bit_difference(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.detach().cpu().contiguous().view({-1});
  const at::Tensor y = b.detach().cpu().contiguous().view({-1});
  const size_t e = x.element_size();
  const auto* px = static_cast<const unsigned char*>(x.data_ptr());
  const auto* py = static_cast<const unsigned char*>(y.data_ptr());
  int64_t count = 0, first = -1;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::memcmp(px + i * e, py + i * e, e) != 0) {
      if (first < 0) first = i;
      ++count;
    }
  }
  if (count == 0) return "";
  auto bits = [&](const unsigned char* p) {
    uint64_t u = 0;
    std::memcpy(&u, p + first * e, e);
    std::ostringstream os;
    os << "0x" << std::hex << u;
    return os.str();
  };
  std::ostringstream os;
  os << count << " of " << x.numel() << " elements differ; first at flat " << first << ": "
     << std::setprecision(17) << x[first].item<double>() << " (" << bits(px) << ") vs "
     << y[first].item<double>() << " (" << bits(py) << ")";
  return os.str();
}

/// gate_up [rows, 2F] on the GPU: normal values of spread `scale`, with the edges of silu's exp
/// planted in the gate half (±0, tiny, large of both signs, where exp(−g) overflows).
at::Tensor swiglu_input(int64_t rows, int64_t f, double scale, at::ScalarType dtype) {
  at::Tensor x = (scale * at::randn({rows, 2 * f}, at::kDouble)).contiguous();
  const double edges[] = {0.0,   -0.0,  1e-30,  -1e-30,  20.0,   -20.0, 88.0,
                          -88.0, 100.0, -100.0, -1000.0, 1000.0, 0.5,   -0.5};
  auto* p = x.data_ptr<double>();
  for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]) && i < static_cast<size_t>(f); ++i) {
    p[i] = edges[i];
  }
  return x.to(dtype).cuda();
}

TEST(KernelOpsCudaTest, SwigluIsBitwiseTheComposite_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_OPS();
  DeterministicGuard det(/*fill=*/true);
  at::manual_seed(31);
  struct Shape {
    int64_t rows, f;
    double scale;
  };
  // Odd sizes; the small model's MLP (s 2048, F 2816); values wide enough to reach both tails.
  const Shape shapes[] = {{7, 37, 3.0}, {2048, 2816, 2.0}, {33, 64, 12.0}};
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
    for (const Shape& sh : shapes) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " rows " + std::to_string(sh.rows) + " F " +
                   std::to_string(sh.f));
      const at::Tensor x = swiglu_input(sh.rows, sh.f, sh.scale, dtype);
      const at::Tensor dy = at::randn({sh.rows, sh.f}, at::kDouble).to(dtype).cuda();
      at::Tensor fused_in = x.clone().requires_grad_(true);
      at::Tensor composite_in = x.clone().requires_grad_(true);
      const at::Tensor fused = swiglu(fused_in);
      const auto halves = composite_in.chunk(2, -1);
      const at::Tensor composite = at::silu(halves[0]) * halves[1];
      EXPECT_EQ(first_bit_difference(fused, composite), "") << "forward";
      fused.backward(dy);
      composite.backward(dy);
      EXPECT_EQ(first_bit_difference(fused_in.grad(), composite_in.grad()), "") << "backward";
      // A [s, b, 2F] view, as the MLP gives it, and a non-contiguous one.
      const at::Tensor x3 = x.view({sh.rows, 1, 2 * sh.f});
      EXPECT_EQ(first_bit_difference(swiglu(x3).view({sh.rows, sh.f}), fused), "") << "[s, b, 2F]";
      const at::Tensor wide = at::cat({x, x}, 0).view({2, sh.rows, 2 * sh.f}).transpose(0, 1);
      EXPECT_EQ(first_bit_difference(swiglu(wide).select(1, 1), fused), "") << "strided";
    }
  }
}

/// Every op of ops.h forward and backward on CUDA copies of `inputs` (those with requires_grad
/// get gradients of Σ out·w): the outputs and gradients, on the CPU.
std::vector<at::Tensor> run_ops_on_gpu(at::ScalarType dtype) {
  at::manual_seed(21);
  const int64_t b = 2, s = 48, vocab = 700, hidden = 192;
  const at::Tensor ids = at::randint(0, vocab, {b, s}, at::kLong).cuda();
  const at::Tensor labels = at::randint(0, vocab, {b, s}, at::kLong).cuda();
  const at::Tensor mask = (at::rand({b, s}) > 0.25).to(at::kFloat).cuda();
  const at::Tensor table = at::randn({vocab, hidden}).to(dtype).cuda().requires_grad_(true);
  const at::Tensor w = (1 + 0.1 * at::randn({hidden})).to(dtype).cuda().requires_grad_(true);
  const at::Tensor head = (0.1 * at::randn({vocab, hidden})).to(dtype).cuda().requires_grad_(true);
  const model::RopeTables t = model::rope_tables(s, 32, 10000.0, dtype, at::Device(at::kCUDA));
  const at::Tensor x = embedding_lookup(ids, table);  // [s, b, H]
  const at::Tensor h = rms_norm(x, w, 1e-5);
  const at::Tensor r = rope(h.view({s, b, hidden / 32, 32}), t.cos, t.sin).view({s, b, hidden});
  const at::Tensor m = swiglu(at::cat({r, h}, -1));  // [s, b, H]
  const at::Tensor logits = at::matmul(m, head.t());
  const at::Tensor loss =
      masked_cross_entropy(logits, labels, mask).sum() + cross_entropy(logits, labels).sum() * 0.5;
  loss.backward();
  return {x.detach().cpu(),    h.detach().cpu(),   r.detach().cpu(), m.detach().cpu(),
          loss.detach().cpu(), table.grad().cpu(), w.grad().cpu(),   head.grad().cpu()};
}

TEST(KernelOpsCudaTest, PoisonedMemoryDoesNotReachOutputs_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_OPS();
  // Outputs and workspaces are allocated without LibTorch's NaN fill (ops.cc uninitialized()):
  // what they start from is the allocator's free memory, NaN (0xff) in one run and zeros in the
  // other. Every element must be written: no NaN, and both runs bitwise equal.
  DeterministicGuard det(/*fill=*/false);
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
    SCOPED_TRACE(c10::toString(dtype));
    poison_allocator(0xff, int64_t{64} << 20);
    const std::vector<at::Tensor> poisoned = run_ops_on_gpu(dtype);
    poison_allocator(0x00, int64_t{64} << 20);
    const std::vector<at::Tensor> clean = run_ops_on_gpu(dtype);
    for (size_t i = 0; i < clean.size(); ++i) {
      EXPECT_FALSE(poisoned[i].isnan().any().item<bool>()) << "output " << i << " holds NaN";
      EXPECT_TRUE(at::equal(poisoned[i], clean[i])) << "output " << i << " differs";
    }
  }
}

}  // namespace
}  // namespace mtp::kernels
