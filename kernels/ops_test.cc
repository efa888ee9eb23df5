// The autograd ops of kernels/ops.h on the CPU: agreement with the model's ops
// (harness/model/layers.h, loss.h) within 1e-6 relative in fp32 (plus 1e-6 times the tensor's
// largest magnitude), gradients against float64 central finite differences, bf16 inputs against
// the fp32 model op within 1e-2, bitwise repeatability, the bf16 conversion against c10's, and
// the errors.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <c10/core/GradMode.h>
#include <c10/util/BFloat16.h>

#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <vector>

#include "harness/model/layers.h"
#include "harness/model/loss.h"
#include "harness/model/testing/rope_check.h"
#include "kernels/numerics.h"
#include "kernels/ops.h"
#include "kernels/testing/summary_cases.h"

namespace mtp::kernels {
namespace {

/// |got − ref| ≤ tol·|ref| + tol·max|ref| elementwise (in float64), with the worst element on
/// failure.
::testing::AssertionResult near(const char* what, const at::Tensor& got, const at::Tensor& ref,
                                double tol) {
  if (got.sizes() != ref.sizes()) {
    return ::testing::AssertionFailure()
           << what << ": shape " << got.sizes() << " vs " << ref.sizes();
  }
  const at::Tensor g = got.detach().to(at::kDouble).contiguous();
  const at::Tensor r = ref.detach().to(at::kDouble).contiguous();
  const double scale = r.abs().max().item<double>();
  const at::Tensor excess = (g - r).abs() - (r.abs() * tol + tol * scale);
  const double worst = excess.max().item<double>();
  if (worst <= 0.0 && !g.isnan().any().item<bool>()) {
    return ::testing::AssertionSuccess();
  }
  const int64_t i = excess.reshape({-1}).argmax().item<int64_t>();
  return ::testing::AssertionFailure() << what << ": outside tolerance " << tol << " at flat index "
                                       << i << ": got " << g.reshape({-1})[i].item<double>()
                                       << ", reference " << r.reshape({-1})[i].item<double>();
}

::testing::AssertionResult same_bits(const char* what, const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
      std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << what << ": not bitwise equal";
}

struct Seeded {
  explicit Seeded(uint64_t seed) { at::manual_seed(seed); }
};

// --- agreement with the model's ops (fp32) -----------------------------------------------------

TEST(KernelOpsTest, EmbeddingLookupMatchesModelOp) {
  Seeded s(1);
  const int64_t b = 3, seq = 17, vocab = 40, hidden = 24;
  const at::Tensor ids = at::randint(0, vocab / 2, {b, seq}, at::kLong) * 2;  // odd rows unused
  const at::Tensor table = at::randn({vocab, hidden}).requires_grad_(true);
  const at::Tensor table_m = table.detach().clone().requires_grad_(true);
  const at::Tensor upstream = at::randn({seq, b, hidden});
  const at::Tensor out = embedding_lookup(ids, table);
  const at::Tensor out_m = model::embedding_lookup(ids, table_m);
  EXPECT_TRUE(same_bits("forward", out, out_m));
  (out * upstream).sum().backward();
  (out_m * upstream).sum().backward();
  EXPECT_TRUE(near("grad table", table.grad(), table_m.grad(), 1e-6));
  EXPECT_TRUE(table.grad().narrow(0, 1, 1).eq(0).all().item<bool>());
}

TEST(KernelOpsTest, RmsNormMatchesModelOp) {
  Seeded s(2);
  for (int64_t hidden : {64, 300}) {
    const at::Tensor x = (at::randn({7, 3, hidden}) * 2).requires_grad_(true);
    const at::Tensor w = (1 + 0.1 * at::randn({hidden})).requires_grad_(true);
    const at::Tensor x_m = x.detach().clone().requires_grad_(true);
    const at::Tensor w_m = w.detach().clone().requires_grad_(true);
    const at::Tensor upstream = at::randn({7, 3, hidden});
    const at::Tensor y = rms_norm(x, w, 1e-5);
    const at::Tensor y_m = model::rms_norm(x_m, w_m, 1e-5);
    EXPECT_TRUE(near("forward", y, y_m, 1e-6));
    (y * upstream).sum().backward();
    (y_m * upstream).sum().backward();
    EXPECT_TRUE(near("grad x", x.grad(), x_m.grad(), 1e-6));
    EXPECT_TRUE(near("grad w", w.grad(), w_m.grad(), 1e-6));
  }
}

TEST(KernelOpsTest, CrossEntropyMatchesModelOp) {
  Seeded s(3);
  const int64_t seq = 9, b = 2, vocab = 300;
  const at::Tensor logits = (3 * at::randn({seq, b, vocab})).requires_grad_(true);
  const at::Tensor logits_m = logits.detach().clone().requires_grad_(true);
  const at::Tensor labels = at::randint(0, vocab, {b, seq}, at::kLong);
  const at::Tensor upstream = at::randn({b, seq});
  const at::Tensor ce = cross_entropy(logits, labels);
  const at::Tensor ce_m = model::cross_entropy(logits_m, labels);
  EXPECT_EQ(ce.scalar_type(), at::kFloat);
  EXPECT_TRUE(near("forward", ce, ce_m, 1e-6));
  (ce * upstream).sum().backward();
  (ce_m * upstream).sum().backward();
  EXPECT_TRUE(near("grad logits", logits.grad(), logits_m.grad(), 1e-6));
}

TEST(KernelOpsTest, MaskedCrossEntropyMatchesModelOpTimesMask) {
  Seeded s(4);
  const int64_t seq = 8, b = 3, vocab = 50;
  const at::Tensor logits = (3 * at::randn({seq, b, vocab})).requires_grad_(true);
  const at::Tensor logits_m = logits.detach().clone().requires_grad_(true);
  const at::Tensor labels = at::randint(0, vocab, {b, seq}, at::kLong);
  const at::Tensor mask = (at::rand({b, seq}) > 0.3).to(at::kFloat);
  const at::Tensor upstream = at::randn({b, seq});
  const at::Tensor ce = masked_cross_entropy(logits, labels, mask);
  const at::Tensor ce_m = model::cross_entropy(logits_m, labels) * mask;
  EXPECT_TRUE(near("forward", ce, ce_m, 1e-6));
  (ce * upstream).sum().backward();
  (ce_m * upstream).sum().backward();
  EXPECT_TRUE(near("grad logits", logits.grad(), logits_m.grad(), 1e-6));
}

// --- float64 finite differences ----------------------------------------------------------------

/// Central differences (step 1e-6) of J(input) = Σ f(input)·R for every element of `input`
/// (float64), against autograd.
void expect_gradient_matches_fd(const std::string& what, at::Tensor input,
                                const std::function<at::Tensor(const at::Tensor&)>& f) {
  input = input.detach().clone().requires_grad_(true);
  const at::Tensor weights = at::randn(f(input.detach()).sizes(), at::kDouble);
  (f(input) * weights).sum().backward();
  const at::Tensor grad = input.grad().reshape({-1});
  const c10::AutoGradMode no_grad(false);
  at::Tensor flat = input.detach().reshape({-1});
  const double step = 1e-6;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double orig = flat[i].item<double>();
    flat[i] = orig + step;
    const double plus = (f(input.detach()) * weights).sum().item<double>();
    flat[i] = orig - step;
    const double minus = (f(input.detach()) * weights).sum().item<double>();
    flat[i] = orig;
    const double fd = (plus - minus) / (2 * step);
    const double ad = grad[i].item<double>();
    EXPECT_NEAR(ad, fd, 1e-7 * std::max(1.0, std::fabs(fd))) << what << " element " << i;
  }
}

TEST(KernelOpsTest, GradientsMatchFloat64FiniteDifferences) {
  Seeded s(5);
  const at::Tensor ids = at::tensor({0, 3, 3, 1, 0, 3}, at::kLong).view({2, 3});
  expect_gradient_matches_fd("embedding table", at::randn({5, 4}, at::kDouble),
                             [&](const at::Tensor& t) { return embedding_lookup(ids, t); });
  const at::Tensor x = 2 * at::randn({3, 2, 6}, at::kDouble);
  const at::Tensor w = 1 + 0.1 * at::randn({6}, at::kDouble);
  expect_gradient_matches_fd("rms_norm x", x,
                             [&](const at::Tensor& t) { return rms_norm(t, w, 1e-5); });
  expect_gradient_matches_fd("rms_norm weight", w,
                             [&](const at::Tensor& t) { return rms_norm(x, t, 1e-5); });
  const at::Tensor logits = 3 * at::randn({3, 2, 7}, at::kDouble);
  const at::Tensor labels = at::randint(0, 7, {2, 3}, at::kLong);
  const at::Tensor mask = at::tensor({1.0, 0.0, 1.0, 1.0, 1.0, 0.0}, at::kDouble).view({2, 3});
  expect_gradient_matches_fd("cross_entropy logits", logits,
                             [&](const at::Tensor& t) { return cross_entropy(t, labels); });
  expect_gradient_matches_fd("masked_cross_entropy logits", logits, [&](const at::Tensor& t) {
    return masked_cross_entropy(t, labels, mask);
  });
}

// --- bf16, determinism, conversions ------------------------------------------------------------

TEST(KernelOpsTest, Bf16InputsAgreeWithFp32ModelOps) {
  Seeded s(6);
  const at::Tensor x = (2 * at::randn({5, 2, 96})).to(at::kBFloat16).requires_grad_(true);
  const at::Tensor w = (1 + 0.1 * at::randn({96})).to(at::kBFloat16).requires_grad_(true);
  const at::Tensor y = rms_norm(x, w, 1e-5);
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  const at::Tensor x32 = x.detach().to(at::kFloat).requires_grad_(true);
  const at::Tensor w32 = w.detach().to(at::kFloat).requires_grad_(true);
  const at::Tensor y32 = model::rms_norm(x32, w32, 1e-5);
  EXPECT_TRUE(near("rms_norm forward", y, y32, 1e-2));
  const at::Tensor up = at::randn({5, 2, 96});
  (y.to(at::kFloat) * up).sum().backward();
  (y32 * up.to(at::kBFloat16).to(at::kFloat)).sum().backward();
  EXPECT_TRUE(near("rms_norm grad x", x.grad(), x32.grad(), 1e-2));
  EXPECT_TRUE(near("rms_norm grad w", w.grad(), w32.grad(), 1e-2));

  const at::Tensor logits = (3 * at::randn({6, 2, 70})).to(at::kBFloat16).requires_grad_(true);
  const at::Tensor labels = at::randint(0, 70, {2, 6}, at::kLong);
  const at::Tensor ce = cross_entropy(logits, labels);
  EXPECT_EQ(ce.scalar_type(), at::kFloat);  // fp32 loss for bf16 logits
  const at::Tensor l32 = logits.detach().to(at::kFloat).requires_grad_(true);
  const at::Tensor ce32 = model::cross_entropy(l32, labels);
  EXPECT_TRUE(near("cross_entropy forward", ce, ce32, 1e-6));  // fp32 arithmetic, fp32 output
  ce.sum().backward();
  ce32.sum().backward();
  EXPECT_EQ(logits.grad().scalar_type(), at::kBFloat16);
  EXPECT_TRUE(near("cross_entropy grad", logits.grad(), l32.grad(), 1e-2));

  const at::Tensor ids = at::randint(0, 30, {2, 9}, at::kLong);
  const at::Tensor table = at::randn({30, 8}).to(at::kBFloat16).requires_grad_(true);
  const at::Tensor t32 = table.detach().to(at::kFloat).requires_grad_(true);
  const at::Tensor ue = at::randn({9, 2, 8}).to(at::kBFloat16);
  (embedding_lookup(ids, table) * ue).sum().backward();
  (model::embedding_lookup(ids, t32) * ue.to(at::kFloat)).sum().backward();
  EXPECT_TRUE(near("embedding grad", table.grad(), t32.grad(), 1e-2));
}

TEST(KernelOpsTest, RepeatedCallsAreBitwiseEqual) {
  Seeded s(7);
  const at::Tensor x = at::randn({4, 3, 130}).transpose(0, 2);  // non-contiguous [130, 3, 4]
  const at::Tensor w = at::randn({4});
  at::Tensor grads[2];
  at::Tensor outs[2];
  for (int rep = 0; rep < 2; ++rep) {
    const at::Tensor xr = x.detach().clone().requires_grad_(true);
    outs[rep] = rms_norm(xr, w, 1e-5);
    outs[rep].sum().backward();
    grads[rep] = xr.grad();
  }
  EXPECT_TRUE(same_bits("rms_norm forward", outs[0], outs[1]));
  EXPECT_TRUE(same_bits("rms_norm grad", grads[0], grads[1]));
  EXPECT_TRUE(near("non-contiguous input", outs[0], model::rms_norm(x, w, 1e-5), 1e-6));
}

TEST(KernelOpsTest, RopeIsBitwiseTheModelComposite) {
  for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    testing::expect_rope_matches_composite(dtype, at::Device(at::kCPU));
  }
  // The model sizes' head dims, and an odd row count.
  testing::expect_rope_matches_composite(at::kBFloat16, at::Device(at::kCPU), 33, 1, 2, 64, 6);
}

// On the CPU kernels::swiglu is LibTorch's composite (ops.h): the model's MLP with either kernel
// set gives the same bits, forward and every gradient, in each dtype.
TEST(KernelOpsTest, SwigluOnTheCpuIsTheModelsComposite) {
  at::manual_seed(5);
  for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor x = (2 * at::randn({9, 2, 16})).to(dtype);
    const at::Tensor fc1 = (0.3 * at::randn({2 * 24, 16})).to(dtype);
    const at::Tensor fc2 = (0.3 * at::randn({16, 24})).to(dtype);
    const at::Tensor dy = at::randn({9, 2, 16}).to(dtype);
    std::vector<std::vector<at::Tensor>> results;
    for (auto kernels : {config::Kernels::kHarness, config::Kernels::kTorch}) {
      std::vector<at::Tensor> in = {x.clone().requires_grad_(true),
                                    fc1.clone().requires_grad_(true),
                                    fc2.clone().requires_grad_(true)};
      const at::Tensor y = model::swiglu(in[0], in[1], in[2], kernels);
      y.backward(dy);
      results.push_back({y.detach(), in[0].grad(), in[1].grad(), in[2].grad()});
    }
    const char* names[] = {"forward", "dx", "dfc1", "dfc2"};
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(same_bits(names[i], results[0][i], results[1][i]));
    }
  }
}

TEST(KernelOpsTest, Bf16ConversionMatchesC10) {
  std::mt19937 rng(8);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 200000; ++i) {
    // Random patterns, and every 4th one forced onto a rounding tie.
    uint32_t u = any_bits(rng);
    if (i % 4 == 0) {
      u = (u & 0xffff0000u) | 0x8000u;
    }
    const float f = bits_float(u);
    if (std::isnan(f)) {
      continue;
    }
    const c10::BFloat16 ref(f);
    ASSERT_EQ(to_bf16(f).bits, ref.x) << std::hex << "float bits 0x" << u;
  }
}

// --- errors ------------------------------------------------------------------------------------

TEST(KernelOpsTest, BadInputsThrow) {
  const at::Tensor table = at::randn({5, 4});
  EXPECT_THROW(embedding_lookup(at::zeros({2, 3}, at::kInt), table), c10::Error);
  EXPECT_THROW(rms_norm(at::randn({2, 4}), at::randn({3}), 1e-5), c10::Error);
  EXPECT_THROW(rms_norm(at::randn({2, 4}, at::kDouble), at::randn({4}), 1e-5), c10::Error);
  EXPECT_THROW(rms_norm(at::zeros({2, 4}, at::kHalf), at::zeros({4}, at::kHalf), 1e-5), c10::Error);
  EXPECT_THROW(cross_entropy(at::randn({3, 2, 5}), at::zeros({3, 2}, at::kLong)), c10::Error);
  EXPECT_THROW(cross_entropy(at::randn({3, 2, 5}), at::full({2, 3}, 5, at::kLong)),
               std::out_of_range);
  EXPECT_THROW(
      masked_cross_entropy(at::randn({3, 2, 5}), at::zeros({2, 3}, at::kLong), at::ones({3, 2})),
      c10::Error);
  const at::Tensor cs = at::ones({8, 4}), sn = at::zeros({8, 4});
  EXPECT_THROW(rope(at::randn({8, 2, 3}), cs, sn), c10::Error);  // not 4-D
  EXPECT_THROW(rope(at::randn({8, 2, 3, 5}), at::ones({8, 5}), at::zeros({8, 5})),
               c10::Error);                                                      // odd head dim
  EXPECT_THROW(rope(at::randn({7, 2, 3, 4}), cs, sn), c10::Error);               // s ≠ table rows
  EXPECT_THROW(rope(at::randn({8, 2, 3, 4}, at::kDouble), cs, sn), c10::Error);  // dtype
  EXPECT_THROW(rope(at::randn({8, 2, 3, 4}), cs, at::zeros({8, 2})), c10::Error);
  EXPECT_THROW(swiglu(at::randn({4, 5})), c10::Error);             // odd last dimension
  EXPECT_THROW(swiglu(at::randn({4, 0})), c10::Error);             // F = 0
  EXPECT_THROW(swiglu(at::tensor(1.0)), c10::Error);               // a scalar
  EXPECT_THROW(swiglu(at::zeros({4, 6}, at::kHalf)), c10::Error);  // dtype
  EXPECT_THROW(swiglu(at::zeros({4, 6}, at::kLong)), c10::Error);  // dtype
}

TEST(BlockDigestsOpTest, EachRowIsXxh3OfABlockOfTheContiguousBytes) {
  at::manual_seed(13);
  const at::Tensor base = at::randn({300, 500});  // 150000 elements: 3 blocks, the last short
  for (const at::Tensor& t : {base, base.to(at::kBFloat16), base.t()}) {
    const at::Tensor d = block_digests(t, 65536);
    ASSERT_EQ(d.sizes(), (at::IntArrayRef{3, 2}));
    ASSERT_EQ(d.scalar_type(), at::kLong);
    const at::Tensor c = t.contiguous();
    const auto* bytes = static_cast<const uint8_t*>(c.data_ptr());
    const size_t block = 65536 * c.element_size(), total = c.numel() * c.element_size();
    for (int64_t b = 0; b < 3; ++b) {
      const size_t len = std::min(block, total - b * block);
      const XXH128_hash_t h = XXH3_128bits(bytes + b * block, len);
      EXPECT_EQ(static_cast<uint64_t>(d[b][0].item<int64_t>()), h.high64) << "block " << b;
      EXPECT_EQ(static_cast<uint64_t>(d[b][1].item<int64_t>()), h.low64) << "block " << b;
    }
  }
  EXPECT_EQ(block_digests(at::empty({0}), 65536).size(0), 0);
  EXPECT_THROW(block_digests(base, 0), c10::Error);
  EXPECT_THROW(block_digests(base.to(at::kDouble), 65537), c10::Error);  // > 512 KiB blocks
}

TEST(BlockSummariesOpTest, ABatchIsEachTensorsRowsInOrder) {
  const std::vector<at::Tensor> cases = testing::summary_cases(at::kCPU);
  const BlockSummaryBatch batch = block_summaries(cases, 65536);
  ASSERT_EQ(batch.first_row.size(), cases.size() + 1);
  EXPECT_EQ(batch.first_row, (std::vector<int64_t>{0, 3, 5, 5, 6, 8, 11, 13}));
  ASSERT_EQ(batch.rows.sizes(), (at::IntArrayRef{13, 5}));
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(at::equal(batch.of(i), block_summaries(cases[i], 65536)));
  }
  // The planted values, as the rows count them.
  EXPECT_EQ(batch.of(0)[0][2].item<int64_t>(), 1);
  EXPECT_EQ(batch.of(0)[1][3].item<int64_t>(), 65536 + 3);
  EXPECT_EQ(batch.of(1)[1][3].item<int64_t>(), 70000);
  EXPECT_EQ(batch.of(1)[1][4].item<int64_t>(), 0xff80);  // bf16 −inf
  EXPECT_EQ(batch.of(4).select(1, 2).sum().item<int64_t>(), 0);
  EXPECT_EQ(batch.of(6)[1][3].item<int64_t>(), 65536);
  EXPECT_EQ(batch.of(6)[0][2].item<int64_t>(), 0);
}

TEST(BlockSummariesOpTest, BadListsThrowBeforeAnyWork) {
  EXPECT_THROW(block_summaries(std::vector<at::Tensor>{}, 65536), c10::Error);
  const std::vector<at::Tensor> complex{at::randn({4}), at::randn({4}, at::kComplexFloat)};
  EXPECT_THROW(block_summaries(complex, 65536), c10::Error);
  const std::vector<at::Tensor> big{at::randn({4}), at::randn({4}, at::kDouble)};
  EXPECT_NO_THROW(block_summaries(big, 65536));
  EXPECT_THROW(block_summaries(big, 65537), c10::Error);  // > 512 KiB blocks of the doubles
  EXPECT_THROW(block_summaries(big, 0), c10::Error);
}

}  // namespace
}  // namespace mtp::kernels
