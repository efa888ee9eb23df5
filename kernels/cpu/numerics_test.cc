// kernels/numerics.h: bf16 round-to-nearest-even, exp_f32 and log_f32 accuracy (against
// float64 std::exp/std::log, in ulps of the float result) and special values, and the kRowLanes
// reduction order.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/numerics.h"

namespace mtp::kernels {
namespace {

uint16_t bf16_bits(float f) { return to_bf16(f).bits; }

TEST(NumericsTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  // Ties: 1 + 2^-8 lies halfway between 0x3f80 and 0x3f81 → even 0x3f80; 1 + 3·2^-8 between
  // 0x3f81 and 0x3f82 → even 0x3f82. Just above a tie rounds up.
  EXPECT_EQ(bf16_bits(bits_float(0x3f808000u)), 0x3f80);
  EXPECT_EQ(bf16_bits(bits_float(0x3f818000u)), 0x3f82);
  EXPECT_EQ(bf16_bits(bits_float(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16_bits(bits_float(0x3f807fffu)), 0x3f80);
  // Overflow to infinity, infinities, NaN.
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf16_bits(bits_float(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  EXPECT_EQ(bf16_bits(bits_float(0xff800001u)), 0x7fc0);  // a NaN that would round to -inf
  // Subnormals round like everything else.
  EXPECT_EQ(bf16_bits(bits_float(0x00008000u)), 0x0000);
  EXPECT_EQ(bf16_bits(bits_float(0x00018000u)), 0x0002);
  // Widening is exact and round-trips.
  for (uint32_t b = 0; b < 0x10000u; b += 7) {
    const Bf16 h{static_cast<uint16_t>(b)};
    const float f = to_float(h);
    if (!std::isnan(f)) {
      EXPECT_EQ(to_bf16(f).bits, h.bits);
    }
  }
}

/// Error of `got` against the exact `ref` in ulps of the float nearest to ref.
double ulp_error(float got, double ref) {
  const float r = static_cast<float>(ref);
  if (std::isinf(r)) {
    return got == r ? 0.0 : std::numeric_limits<double>::infinity();
  }
  const double spacing =
      std::fabs(static_cast<double>(std::nextafter(std::fabs(r), INFINITY)) - std::fabs(r));
  return std::fabs(static_cast<double>(got) - ref) / spacing;
}

TEST(NumericsTest, ExpF32IsWithinTwoUlps) {
  double worst = 0.0;
  float worst_x = 0.0f;
  for (double x = -103.9; x < 88.72; x += 1.0 / 4099.0) {
    const float xf = static_cast<float>(x);
    const double e = ulp_error(exp_f32(xf), std::exp(static_cast<double>(xf)));
    if (e > worst) {
      worst = e;
      worst_x = xf;
    }
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-200.0f), 0.0f);
  EXPECT_EQ(exp_f32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp_f32(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_GT(exp_f32(-103.0f), 0.0f);  // subnormal result
}

TEST(NumericsTest, LogF32IsWithinTwoUlps) {
  double worst = 0.0;
  float worst_x = 0.0f;
  // Every exponent (subnormals included), 2^16 mantissas each.
  for (uint32_t u = 1; u < 0x7f800000u; u += 0x7f) {
    const float x = bits_float(u);
    const double ref = std::log(static_cast<double>(x));
    if (ref == 0.0) {
      continue;
    }
    const double e = ulp_error(log_f32(x), ref);
    if (e > worst) {
      worst = e;
      worst_x = x;
    }
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
  EXPECT_EQ(log_f32(1.0f), 0.0f);
  EXPECT_EQ(log_f32(0.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(log_f32(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(log_f32(-1.0f)));
  EXPECT_TRUE(std::isnan(log_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST(NumericsTest, RowTreeReduceFollowsTheLaneOrder) {
  // 257 elements: lane 0 folds elements 0 and 256, lane 1 element 1. With 1e8, 1, …, −1e8 the
  // lane order gives (1e8 − 1e8) + 1 = 1, the plain ascending sum (1e8 + 1) − 1e8 = 0.
  std::vector<float> v(257, 0.0f);
  v[0] = 1e8f;
  v[1] = 1.0f;
  v[256] = -1e8f;
  const float sum = row_tree_reduce<float>(
      257, 0.0f, [&](int64_t j) { return v[j]; }, [](float a, float b) { return a + b; });
  EXPECT_EQ(sum, 1.0f);
  // Fewer elements than lanes: the tree still pairs lane i with lane i + s.
  const float small = row_tree_reduce<float>(
      3, 0.0f, [](int64_t j) { return static_cast<float>(j + 1); },
      [](float a, float b) { return a + b; });
  EXPECT_EQ(small, 6.0f);
  EXPECT_EQ(row_tree_reduce<float>(
                0, 0.0f, [](int64_t) { return 1.0f; }, [](float a, float b) { return a + b; }),
            0.0f);
}

TEST(NumericsTest, MaxNanPropagatesNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(max_nan(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(max_nan(1.0f, nan)));
  EXPECT_EQ(max_nan(1.0f, 2.0f), 2.0f);
  EXPECT_EQ(max_nan(2.0f, 1.0f), 2.0f);
}

}  // namespace
}  // namespace mtp::kernels
