// The harness's causal attention on the CPU (kernels/attention_math.h) for fp32, fp64 and bf16
// inputs: against the float64 reference of testing/attention_problem.h (outputs stored as T:
// testbed.h's rounded tolerances; lse in Acc<T>), bitwise repeatability with poisoned outputs and
// scratch, batch invariance (each pair alone gives the batched pair's bits), causality (keys and
// values after a query change none of its output's bits) and the errors it throws.
#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/testing/attention_problem.h"
#include "kernels/testing/testbed.h"

namespace mtp::kernels::cpu {
namespace {

using namespace mtp::kernels::testing;  // NOLINT(build/namespaces)

template <typename T>
class AttentionCpuTest : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionCpuTest, InputTypes, TypeNames);

std::string dims_name(const AttentionDims& d) {
  return "n " + std::to_string(d.n) + ", s " + std::to_string(d.s) + ", hn " + std::to_string(d.hn);
}

TYPED_TEST(AttentionCpuTest, MatchesFloat64Reference) {
  using T = TypeParam;
  for (const AttentionDims& d : attention_shapes()) {
    SCOPED_TRACE(dims_name(d));
    const auto p = AttentionProblem<T>::make(d.n, d.s, d.hn, current_test_seed(dims_name(d)));
    const auto got = run_cpu(p, 0xff);
    const AttentionRef ref = ref_attention(p);
    const Tolerance tol = rounded_tolerance<T>();
    EXPECT_TRUE(close("o", widen(got.o), ref.o, tol, d.hn));
    EXPECT_TRUE(close("lse", widen(got.lse), ref.lse, acc_tolerance<T>(), d.s));
    EXPECT_TRUE(close("dq", widen(got.dq), ref.dq, tol, d.hn));
    EXPECT_TRUE(close("dk", widen(got.dk), ref.dk, tol, d.hn));
    EXPECT_TRUE(close("dv", widen(got.dv), ref.dv, tol, d.hn));
  }
}

TYPED_TEST(AttentionCpuTest, BitwiseRepeatableWithPoisonedOutputsAndScratch) {
  using T = TypeParam;
  const auto p = AttentionProblem<T>::make(6, 29, 12, current_test_seed("p"));
  const auto a = run_cpu(p, 0xff), b = run_cpu(p, 0x00);
  EXPECT_FALSE(any_nan(a.o) || any_nan(a.dq) || any_nan(a.dk) || any_nan(a.dv) || any_nan(a.lse));
  EXPECT_TRUE(bitwise_equal("o", a.o, b.o, 12));
  EXPECT_TRUE(bitwise_equal("lse", a.lse, b.lse, 29));
  EXPECT_TRUE(bitwise_equal("dq", a.dq, b.dq, 12));
  EXPECT_TRUE(bitwise_equal("dk", a.dk, b.dk, 12));
  EXPECT_TRUE(bitwise_equal("dv", a.dv, b.dv, 12));
}

TYPED_TEST(AttentionCpuTest, EachPairAloneGivesTheBatchedBits) {
  using T = TypeParam;
  const auto p = AttentionProblem<T>::make(5, 21, 10, current_test_seed("p"));
  const auto all = run_cpu(p, 0xff);
  const size_t e = 21 * 10;
  for (int64_t i = 0; i < 5; ++i) {
    SCOPED_TRACE("pair " + std::to_string(i));
    const auto one = run_cpu(p.pair(i), 0x00);
    const auto slice = [&](const std::vector<T>& x) {
      return std::vector<T>(x.begin() + i * e, x.begin() + (i + 1) * e);
    };
    EXPECT_TRUE(bitwise_equal("o", one.o, slice(all.o), 10));
    EXPECT_TRUE(bitwise_equal("dq", one.dq, slice(all.dq), 10));
    EXPECT_TRUE(bitwise_equal("dk", one.dk, slice(all.dk), 10));
    EXPECT_TRUE(bitwise_equal("dv", one.dv, slice(all.dv), 10));
  }
}

TYPED_TEST(AttentionCpuTest, LaterKeysAndValuesChangeNoEarlierOutputBit) {
  using T = TypeParam;
  const int64_t s = 19, hn = 6, cut = 11;  // rows < cut must not see keys/values ≥ cut
  auto p = AttentionProblem<T>::make(1, s, hn, current_test_seed("p"));
  const auto before = run_cpu(p, 0xff);
  for (int64_t j = cut; j < s; ++j) {
    for (int64_t d = 0; d < hn; ++d) {
      p.k[j * hn + d] = from_double<T>(-7.0 * to_double(p.k[j * hn + d]) + 3.0);
      p.v[j * hn + d] = from_double<T>(5.0 + to_double(p.v[j * hn + d]));
    }
  }
  const auto after = run_cpu(p, 0x00);
  const auto head = [&](const std::vector<T>& x) {
    return std::vector<T>(x.begin(), x.begin() + cut * hn);
  };
  EXPECT_TRUE(bitwise_equal("o of rows before the change", head(after.o), head(before.o), hn));
  EXPECT_FALSE(bitwise_equal("o of the changed rows", after.o, before.o, hn));
}

TEST(AttentionCpuErrorsTest, BadArgumentsThrowBeforeWriting) {
  const auto p = AttentionProblem<float>::make(1, 4, 2, 7);
  std::vector<float> o(8, 1.0f), lse(4, 1.0f), probs(16, 1.0f);
  AttentionForwardBuffers<float> f;
  f.q = p.q.data(), f.k = p.k.data(), f.v = p.v.data(), f.o = o.data(), f.lse = lse.data();
  f.probs = probs.data();
  AttentionDims d{1, 4, 2};
  EXPECT_THROW(attention_forward(f, d, std::numeric_limits<double>::infinity()),
               std::invalid_argument);
  EXPECT_THROW(attention_forward(f, d, std::nan("")), std::invalid_argument);
  AttentionDims negative{1, -4, 2};
  EXPECT_THROW(attention_forward(f, negative, 0.5), std::invalid_argument);
  AttentionForwardBuffers<float> missing = f;
  missing.probs = nullptr;
  try {
    attention_forward(missing, d, 0.5);
    ADD_FAILURE() << "no exception for a null scratch";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("probs is null"), std::string::npos) << e.what();
  }
  for (float x : o) EXPECT_EQ(x, 1.0f);
  AttentionDims empty{0, 4, 2};
  EXPECT_NO_THROW(attention_forward(AttentionForwardBuffers<float>{}, empty, 0.5));
}

}  // namespace
}  // namespace mtp::kernels::cpu
