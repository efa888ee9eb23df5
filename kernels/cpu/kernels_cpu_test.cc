// The CPU kernels (kernels_cpu.h) for fp32, fp64 and bf16 inputs: against float64 references
// (tolerances in testing/testbed.h: outputs stored as fp32 1e-6, fp64 1e-12, bf16 1e-2, each
// relative plus the same factor times the tensor's largest magnitude), the documented summation
// orders, bitwise repeatability on fresh inputs, batch invariance where promised, full overwrite
// of poisoned outputs, and the errors they throw.
#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/testing/testbed.h"

namespace mtp::kernels::cpu {
namespace {

using namespace mtp::kernels::testing;  // NOLINT(build/namespaces)

template <typename T>
class KernelsCpuTest : public ::testing::Test {
 protected:
  uint64_t seed(const std::string& what) const { return current_test_seed(what); }
};

TYPED_TEST_SUITE(KernelsCpuTest, InputTypes, TypeNames);

std::string shape_name(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

// --- float64 references ------------------------------------------------------------------------

TYPED_TEST(KernelsCpuTest, EmbeddingBackwardMatchesFloat64Reference) {
  using T = TypeParam;
  for (const auto& s : embedding_shapes()) {
    SCOPED_TRACE("T=" + std::to_string(s.tokens) + " H=" + std::to_string(s.hidden) +
                 " V=" + std::to_string(s.vocab));
    const auto p = EmbeddingProblem<T>::make(s.tokens, s.hidden, s.vocab, this->seed("p"));
    const auto got = run_cpu(p, 0xff);
    const auto ref = ref_embedding_backward(widen(p.grad_out), p.ids, s.hidden, s.vocab);
    EXPECT_TRUE(close("grad_table", widen(got), ref, rounded_tolerance<T>(), s.hidden));
  }
}

TYPED_TEST(KernelsCpuTest, RmsNormMatchesFloat64Reference) {
  using T = TypeParam;
  for (const auto& s : rms_shapes()) {
    SCOPED_TRACE("rows x hidden = " + shape_name(s.rows, s.cols));
    const auto p = RmsProblem<T>::make(s.rows, s.cols, this->seed(shape_name(s.rows, s.cols)));
    const auto o = run_cpu(p, 0xff);
    const auto fwd = ref_rms_norm_forward(widen(p.x), widen(p.w), p.rows, p.hidden, p.eps);
    const auto bwd =
        ref_rms_norm_backward(widen(p.dy), widen(p.x), widen(p.w), p.rows, p.hidden, p.eps);
    EXPECT_TRUE(close("y", widen(o.y), fwd.y, rounded_tolerance<T>(), p.hidden));
    EXPECT_TRUE(close("rstd", widen(o.rstd), fwd.rstd, acc_tolerance<T>()));
    EXPECT_TRUE(close("dx", widen(o.dx), bwd.dx, rounded_tolerance<T>(), p.hidden));
    EXPECT_TRUE(close("dweight", widen(o.dw), bwd.dw, rounded_tolerance<T>()));
  }
}

TYPED_TEST(KernelsCpuTest, CrossEntropyMatchesFloat64Reference) {
  using T = TypeParam;
  for (const auto& s : ce_shapes()) {
    SCOPED_TRACE("rows x vocab = " + shape_name(s.rows, s.cols));
    const auto p = CeProblem<T>::make(s.rows, s.cols, this->seed(shape_name(s.rows, s.cols)));
    for (bool masked : {true, false}) {
      SCOPED_TRACE(masked ? "masked" : "unmasked");
      const auto o = run_cpu(p, 0xff, masked);
      const auto ref = ref_cross_entropy(widen(p.logits), p.labels,
                                         masked ? widen(p.mask) : std::vector<double>{},
                                         widen(p.grad_loss), p.rows, p.vocab);
      EXPECT_TRUE(close("loss", widen(o.loss), ref.loss, acc_tolerance<T>()));
      EXPECT_TRUE(close("grad_logits", widen(o.grad_logits), ref.grad_logits,
                        rounded_tolerance<T>(), p.vocab));
    }
  }
}

// --- documented orders -------------------------------------------------------------------------

TEST(KernelsCpuOrderTest, EmbeddingRowsSumInAscendingPosition) {
  // Row 3 receives 1e8, 1, −1e8 at positions 0, 2, 4; row 1 receives 1, 1e8, −1e8. In fp32 the
  // ascending-position sum is (1e8 + 1) − 1e8 = 0 for row 3 and (1 + 1e8) − 1e8 = 0 for row 1,
  // whereas any other order of row 3 could give 1. Rows 0 and 2 receive nothing: +0.
  const std::vector<int64_t> ids = {3, 1, 3, 1, 3, 1};
  const std::vector<float> grad = {1e8f, 1.0f, 1.0f, 1e8f, -1e8f, -1e8f};
  std::vector<float> table(4, std::numeric_limits<float>::quiet_NaN());
  embedding_backward<float>(grad.data(), ids.data(), 6, 1, 4, table.data());
  EXPECT_EQ(float_bits(table[0]), 0u);
  EXPECT_EQ(float_bits(table[1]), 0u);
  EXPECT_EQ(float_bits(table[2]), 0u);
  EXPECT_EQ(float_bits(table[3]), 0u);
  // Row 3 receiving −1e8, 1e8, 1 instead sums to (−1e8 + 1e8) + 1 = 1.
  const std::vector<float> reversed = {-1e8f, 1.0f, 1e8f, 1e8f, 1.0f, -1e8f};
  embedding_backward<float>(reversed.data(), ids.data(), 6, 1, 4, table.data());
  EXPECT_EQ(table[3], 1.0f);
}

TEST(KernelsCpuOrderTest, EmbeddingEqualsSequentialFp32SumPerRow) {
  const auto p = EmbeddingProblem<float>::make(500, 9, 30, stable_seed("sequential"));
  const auto got = run_cpu(p, 0xff);
  std::vector<float> expect(static_cast<size_t>(p.vocab * p.hidden), 0.0f);
  for (int64_t t = 0; t < p.tokens; ++t) {
    for (int64_t h = 0; h < p.hidden; ++h) {
      expect[p.ids[t] * p.hidden + h] += p.grad_out[t * p.hidden + h];
    }
  }
  EXPECT_TRUE(bitwise_equal("grad_table", got, expect, p.hidden));
}

TEST(KernelsCpuOrderTest, RmsNormWeightGradientUsesFixedRowBlocks) {
  // The two-level order written out: per block of 64 rows ascending from +0, then the blocks.
  const auto p = RmsProblem<float>::make(200, 5, stable_seed("dw-blocks"));
  const auto o = run_cpu(p, 0xff);
  std::vector<float> expect(5, 0.0f);
  for (int64_t begin = 0; begin < p.rows; begin += kRmsNormDwRowsPerBlock) {
    std::vector<float> partial(5, 0.0f);
    for (int64_t n = begin; n < std::min<int64_t>(p.rows, begin + kRmsNormDwRowsPerBlock); ++n) {
      for (int64_t j = 0; j < 5; ++j) {
        const float xhat = p.x[n * 5 + j] * o.rstd[n];
        partial[j] = partial[j] + p.dy[n * 5 + j] * xhat;
      }
    }
    for (int64_t j = 0; j < 5; ++j) {
      expect[j] = expect[j] + partial[j];
    }
  }
  EXPECT_TRUE(bitwise_equal("dweight", o.dw, expect));
}

TEST(KernelsCpuOrderTest, RmsNormForwardUsesExplicitOperations) {
  // r = 1 / sqrt(Σx²/H + eps) with Σ in the lane order, y = (x·r)·w, recomputed here for one row
  // of 300: lane l holds x_l² (+ x_{l+256}² for l < 44), then the halving tree.
  const int64_t h = 300;
  const auto p = RmsProblem<float>::make(1, h, stable_seed("explicit"));
  const auto o = run_cpu(p, 0xff);
  std::vector<float> lanes(kRowLanes, 0.0f);
  for (int64_t j = 0; j < h; ++j) {
    lanes[j % kRowLanes] = lanes[j % kRowLanes] + p.x[j] * p.x[j];
  }
  for (int s = kRowLanes / 2; s > 0; s /= 2) {
    for (int i = 0; i < s; ++i) {
      lanes[i] = lanes[i] + lanes[i + s];
    }
  }
  const float r = 1.0f / std::sqrt(lanes[0] / static_cast<float>(h) + static_cast<float>(p.eps));
  EXPECT_EQ(float_bits(o.rstd[0]), float_bits(r));
  for (int64_t j = 0; j < h; ++j) {
    EXPECT_EQ(float_bits(o.y[j]), float_bits((p.x[j] * r) * p.w[j])) << j;
  }
}

// --- determinism, batch invariance, overwrite --------------------------------------------------

TYPED_TEST(KernelsCpuTest, BitwiseRepeatableOnFreshInputs) {
  using T = TypeParam;
  for (int rep = 0; rep < 10; ++rep) {
    SCOPED_TRACE("repeat " + std::to_string(rep));
    const std::string r = std::to_string(rep);
    const auto e = EmbeddingProblem<T>::make(300, 33, 50, this->seed("e" + r));
    EXPECT_TRUE(bitwise_equal("grad_table", run_cpu(e, 0xff), run_cpu(e, 0x00), e.hidden));
    const auto n = RmsProblem<T>::make(70, 300, this->seed("n" + r));
    const auto n1 = run_cpu(n, 0xff);
    const auto n2 = run_cpu(n, 0x00);
    EXPECT_TRUE(bitwise_equal("y", n1.y, n2.y, n.hidden));
    EXPECT_TRUE(bitwise_equal("rstd", n1.rstd, n2.rstd));
    EXPECT_TRUE(bitwise_equal("dx", n1.dx, n2.dx, n.hidden));
    EXPECT_TRUE(bitwise_equal("dweight", n1.dw, n2.dw));
    const auto c = CeProblem<T>::make(20, 700, this->seed("c" + r));
    const auto c1 = run_cpu(c, 0xff);
    const auto c2 = run_cpu(c, 0x00);
    EXPECT_TRUE(bitwise_equal("loss", c1.loss, c2.loss));
    EXPECT_TRUE(bitwise_equal("row_max", c1.row_max, c2.row_max));
    EXPECT_TRUE(bitwise_equal("row_sum", c1.row_sum, c2.row_sum));
    EXPECT_TRUE(bitwise_equal("grad_logits", c1.grad_logits, c2.grad_logits, c.vocab));
  }
}

TYPED_TEST(KernelsCpuTest, PoisonedOutputsAreFullyOverwritten) {
  using T = TypeParam;
  // 0xff bytes are NaN in every float type; finite inputs must leave no NaN behind.
  const auto e = EmbeddingProblem<T>::make(100, 20, 31, this->seed("e"));
  const auto table = run_cpu(e, 0xff);
  EXPECT_FALSE(any_nan(table));
  for (int64_t v = 1; v < e.vocab; v += 2) {  // odd rows receive no token: exactly +0
    for (int64_t h = 0; h < e.hidden; ++h) {
      EXPECT_EQ(to_double(table[v * e.hidden + h]), 0.0);
      EXPECT_FALSE(std::signbit(to_double(table[v * e.hidden + h])));
    }
  }
  const auto empty = EmbeddingProblem<T>::make(0, 4, 3, this->seed("empty"));
  for (const auto& x : run_cpu(empty, 0xff)) {
    EXPECT_EQ(to_double(x), 0.0);
  }
  const auto n = RmsProblem<T>::make(66, 260, this->seed("n"));
  const auto o = run_cpu(n, 0xff);
  EXPECT_FALSE(any_nan(o.y) || any_nan(o.rstd) || any_nan(o.dx) || any_nan(o.dw));
  RmsProblem<T> none = n;
  none.rows = 0;
  for (const auto& x : run_cpu(none, 0xff).dw) {  // no rows: dweight = 0
    EXPECT_EQ(to_double(x), 0.0);
  }
  const auto c = CeProblem<T>::make(12, 300, this->seed("c"));
  const auto co = run_cpu(c, 0xff);
  EXPECT_FALSE(any_nan(co.loss) || any_nan(co.row_max) || any_nan(co.row_sum) ||
               any_nan(co.grad_logits));
}

TYPED_TEST(KernelsCpuTest, RowResultsAreBatchInvariant) {
  using T = TypeParam;
  const auto n = RmsProblem<T>::make(70, 300, this->seed("n"));
  const auto all = run_cpu(n, 0xff);
  for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{64}, int64_t{69}}) {
    SCOPED_TRACE("rms row " + std::to_string(r));
    const auto one = run_cpu(n.row(r), 0x00);
    const auto h = n.hidden;
    EXPECT_TRUE(bitwise_equal(
        "y", std::vector<T>(all.y.begin() + r * h, all.y.begin() + (r + 1) * h), one.y));
    EXPECT_TRUE(bitwise_equal("rstd", std::vector<Acc<T>>{all.rstd[r]}, one.rstd));
    EXPECT_TRUE(bitwise_equal(
        "dx", std::vector<T>(all.dx.begin() + r * h, all.dx.begin() + (r + 1) * h), one.dx));
  }
  const auto c = CeProblem<T>::make(20, 700, this->seed("c"));
  const auto call = run_cpu(c, 0xff);
  for (int64_t r : {int64_t{0}, int64_t{7}, int64_t{19}}) {
    SCOPED_TRACE("ce row " + std::to_string(r));
    const auto one = run_cpu(c.row(r), 0x00);
    const auto v = c.vocab;
    EXPECT_TRUE(bitwise_equal("loss", std::vector<Acc<T>>{call.loss[r]}, one.loss));
    EXPECT_TRUE(bitwise_equal(
        "grad_logits",
        std::vector<T>(call.grad_logits.begin() + r * v, call.grad_logits.begin() + (r + 1) * v),
        one.grad_logits));
  }
}

// --- errors ------------------------------------------------------------------------------------

TEST(KernelsCpuErrorTest, OutOfRangeIdsAndLabelsThrow) {
  const std::vector<float> grad(6, 1.0f);
  std::vector<float> table(6, 0.0f);
  const std::vector<int64_t> bad_ids = {0, 3};
  EXPECT_THROW(embedding_backward<float>(grad.data(), bad_ids.data(), 2, 3, 2, table.data()),
               std::out_of_range);
  const std::vector<int64_t> negative = {-1, 0};
  EXPECT_THROW(embedding_backward<float>(grad.data(), negative.data(), 2, 3, 2, table.data()),
               std::out_of_range);
  const std::vector<float> logits(6, 0.0f);
  const std::vector<int64_t> labels = {0, 3};
  std::vector<float> loss(2), mx(2), sum(2), dl(6);
  const std::vector<float> g(2, 1.0f);
  EXPECT_THROW(cross_entropy_forward<float>(logits.data(), labels.data(), nullptr, 2, 3,
                                            loss.data(), mx.data(), sum.data()),
               std::out_of_range);
  EXPECT_THROW(cross_entropy_backward<float>(logits.data(), labels.data(), nullptr, g.data(),
                                             mx.data(), sum.data(), 2, 3, dl.data()),
               std::out_of_range);
}

TEST(KernelsCpuErrorTest, BadSizesAndNullPointersThrow) {
  std::vector<float> buf(8, 1.0f);
  std::vector<int64_t> ids(2, 0);
  EXPECT_THROW(embedding_backward<float>(buf.data(), ids.data(), -1, 2, 2, buf.data()),
               std::invalid_argument);
  EXPECT_THROW(embedding_backward<float>(nullptr, ids.data(), 2, 2, 2, buf.data()),
               std::invalid_argument);
  EXPECT_THROW(rms_norm_forward<float>(buf.data(), buf.data(), 2, 2, 1e-5, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(rms_norm_backward<float>(buf.data(), buf.data(), buf.data(), nullptr, 2, 2,
                                        buf.data(), buf.data()),
               std::invalid_argument);
  EXPECT_THROW(cross_entropy_forward<float>(buf.data(), ids.data(), nullptr, 2, 0, buf.data(),
                                            nullptr, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace mtp::kernels::cpu
