#include "harness/compare/tensor_compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace mtp::compare {
namespace {

using record::DType;
using record::TensorData;
using ::testing::ElementsAre;

constexpr uint64_t kNaNvsNumber = std::numeric_limits<uint64_t>::max();

TensorDiff run(const TensorData& a, const TensorData& b, const std::string& cls) {
  TensorDiff d;
  compare_values(a, b, CompareClass::parse(cls), d);
  return d;
}

TensorData f32(std::vector<float> v) {
  return TensorData::from_f32("t", {static_cast<int64_t>(v.size())}, v);
}

TensorData f32_bits(std::vector<uint32_t> bits) {
  TensorData t = f32(std::vector<float>(bits.size(), 0.0f));
  std::memcpy(t.bytes.data(), bits.data(), t.bytes.size());
  return t;
}

TensorData u16(DType dtype, std::vector<uint16_t> bits) {
  TensorData t;
  t.name = "h";
  t.dtype = dtype;
  t.shape = {static_cast<int64_t>(bits.size())};
  t.bytes.resize(bits.size() * 2);
  std::memcpy(t.bytes.data(), bits.data(), t.bytes.size());
  return t;
}

TEST(TensorCompareTest, IdenticalTensors) {
  TensorDiff d = run(f32({1, 2, 3}), f32({1, 2, 3}), "bitwise");
  EXPECT_EQ(d.numel, 3);
  EXPECT_EQ(d.mismatches, 0);
  EXPECT_EQ(d.bit_mismatches, 0);
  EXPECT_EQ(d.max_ulp, 0u);
  EXPECT_EQ(d.first_index, -1);
  EXPECT_FALSE(d.failed());
}

TEST(TensorCompareTest, PlusAndMinusZero) {
  TensorData a = f32({0.0f});
  TensorData b = f32({-0.0f});
  TensorDiff bw = run(a, b, "bitwise");
  EXPECT_EQ(bw.mismatches, 1);
  EXPECT_EQ(bw.max_ulp, 0u);
  EXPECT_EQ(bw.max_abs, 0.0);
  EXPECT_EQ(bw.a_bits, "0x00000000");
  EXPECT_EQ(bw.b_bits, "0x80000000");
  EXPECT_EQ(bw.a_value, "0");
  EXPECT_EQ(bw.b_value, "-0");
  TensorDiff ulp = run(a, b, "ulp:0");
  EXPECT_EQ(ulp.mismatches, 0);
  EXPECT_EQ(ulp.bit_mismatches, 1);
  EXPECT_EQ(run(a, b, "tol:0,0").mismatches, 0);
  EXPECT_EQ(run(a, b, "differ").mismatches, 1);
}

TEST(TensorCompareTest, NaNs) {
  uint32_t qnan = 0x7fc00000u;
  uint32_t payload = 0x7fc00001u;
  EXPECT_EQ(run(f32_bits({qnan}), f32_bits({qnan}), "bitwise").mismatches, 0);
  TensorDiff p = run(f32_bits({qnan}), f32_bits({payload}), "bitwise");
  EXPECT_EQ(p.mismatches, 1);
  EXPECT_EQ(p.a_bits, "0x7fc00000");
  EXPECT_EQ(p.b_bits, "0x7fc00001");
  // Two NaNs are 0 ULP apart and equal under tol; only their bits differ.
  EXPECT_EQ(run(f32_bits({qnan}), f32_bits({payload}), "ulp:0").mismatches, 0);
  EXPECT_EQ(run(f32_bits({qnan}), f32_bits({payload}), "tol:0,0").mismatches, 0);

  for (const char* cls : {"bitwise", "ulp:1000000", "tol:1000000,1000000", "differ"}) {
    SCOPED_TRACE(cls);
    TensorDiff d = run(f32_bits({qnan}), f32({1.0f}), cls);
    EXPECT_EQ(d.mismatches, 1);
    EXPECT_EQ(d.max_ulp, kNaNvsNumber);
    EXPECT_EQ(d.a_value, "nan");
    EXPECT_EQ(d.b_value, "1");
  }
}

TEST(TensorCompareTest, OneUlpFloat32) {
  TensorData a = TensorData::from_f32("t", {2, 3}, {1, 2, 3, 4, 5, 6});
  TensorData b = a;
  float next = std::nextafter(5.0f, 10.0f);
  std::memcpy(b.bytes.data() + 4 * 4, &next, 4);
  TensorDiff d = run(a, b, "bitwise");
  EXPECT_EQ(d.mismatches, 1);
  EXPECT_EQ(d.max_ulp, 1u);
  EXPECT_EQ(d.first_index, 4);
  EXPECT_THAT(d.first_coord, ElementsAre(1, 1));
  EXPECT_EQ(d.a_value, "5");
  EXPECT_EQ(d.b_value, "5.0000004768371582");
  EXPECT_EQ(d.a_bits, "0x40a00000");
  EXPECT_EQ(d.b_bits, "0x40a00001");
  EXPECT_DOUBLE_EQ(d.max_abs, 4.76837158203125e-07);
  EXPECT_EQ(run(a, b, "ulp:1").mismatches, 0);
  EXPECT_EQ(run(a, b, "ulp:0").mismatches, 1);
}

TEST(TensorCompareTest, OneUlpFloat64) {
  TensorData a = TensorData::from_f64("t", {}, {1.0});
  TensorData b = TensorData::from_f64("t", {}, {std::nextafter(1.0, 2.0)});
  TensorDiff d = run(a, b, "bitwise");
  EXPECT_EQ(d.max_ulp, 1u);
  EXPECT_EQ(d.first_index, 0);
  EXPECT_TRUE(d.first_coord.empty());
  EXPECT_EQ(d.a_value, "1");
  EXPECT_EQ(d.b_value, "1.0000000000000002");
  EXPECT_EQ(d.a_bits, "0x3ff0000000000000");
  EXPECT_EQ(d.b_bits, "0x3ff0000000000001");
}

TEST(TensorCompareTest, BFloat16AndFloat16) {
  TensorDiff bf = run(u16(DType::kBF16, {0x3f80}), u16(DType::kBF16, {0x3f81}), "bitwise");
  EXPECT_EQ(bf.max_ulp, 1u);
  EXPECT_EQ(bf.a_value, "1");
  EXPECT_EQ(bf.b_value, "1.0078125");
  EXPECT_EQ(bf.a_bits, "0x3f80");
  EXPECT_EQ(bf.b_bits, "0x3f81");

  TensorDiff h = run(u16(DType::kF16, {0x3c00, 0x0001, 0xc000}),
                     u16(DType::kF16, {0x3c01, 0x0002, 0xc000}), "bitwise");
  EXPECT_EQ(h.mismatches, 2);
  EXPECT_EQ(h.max_ulp, 1u);
  EXPECT_EQ(h.a_value, "1");
  EXPECT_EQ(h.b_value, "1.0009765625");
  EXPECT_EQ(h.b_bits, "0x3c01");
  TensorDiff sub = run(u16(DType::kF16, {0x0001}), u16(DType::kF16, {0x8001}), "bitwise");
  EXPECT_EQ(sub.a_value, "5.9604644775390625e-08");
  EXPECT_EQ(sub.b_value, "-5.9604644775390625e-08");
  EXPECT_EQ(sub.max_ulp, 2u);  // across zero: +denorm → ±0 → −denorm
  EXPECT_EQ(run(u16(DType::kF16, {0x7c00}), u16(DType::kF16, {0x7c01}), "bitwise").max_ulp,
            kNaNvsNumber);  // inf vs NaN
}

TEST(TensorCompareTest, UlpAcrossZeroAndInfinity) {
  float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(run(f32({tiny}), f32({-tiny}), "bitwise").max_ulp, 2u);
  float inf = std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::max();
  TensorDiff d = run(f32({inf}), f32({max}), "bitwise");
  EXPECT_EQ(d.max_ulp, 1u);
  EXPECT_EQ(d.max_abs, 0.0);  // finite pairs only
  EXPECT_EQ(d.a_value, "inf");
  EXPECT_EQ(run(f32({inf}), f32({max}), "ulp:1").mismatches, 0);
  EXPECT_EQ(run(f32({inf}), f32({max}), "tol:1,1").mismatches, 1);
  EXPECT_EQ(run(f32({inf}), f32({inf}), "tol:0,0").mismatches, 0);
  EXPECT_EQ(run(f32({-inf}), f32({inf}), "tol:1,1").mismatches, 1);
  // The full float64 range: −max vs +max does not overflow the distance.
  double dmax = std::numeric_limits<double>::max();
  TensorDiff wide = run(TensorData::from_f64("t", {1}, {-dmax}),
                        TensorData::from_f64("t", {1}, {dmax}), "bitwise");
  EXPECT_EQ(wide.max_ulp, 2 * uint64_t{0x7fefffffffffffff});
}

TEST(TensorCompareTest, Tolerance) {
  TensorData a = f32({1.0f, 100.0f});
  TensorData b = f32({1.001f, 100.0f});
  EXPECT_EQ(run(a, b, "tol:1e-3,0").mismatches, 0);
  EXPECT_EQ(run(a, b, "tol:1e-4,0").mismatches, 1);
  EXPECT_EQ(run(a, b, "tol:0,0.0011").mismatches, 0);
  EXPECT_EQ(run(a, b, "tol:0,0.0009").mismatches, 1);
  EXPECT_EQ(run(a, b, "bitwise").bit_mismatches, 1);
}

// ‖a − b‖₂ / ‖b‖₂ over the whole tensor: a = (3, 4.5, 0), b = (3, 4, 0) → 0.5 / 5 = 0.1 exactly
// in float64; the near-zero element that would fail an elementwise tolerance does not matter.
TEST(TensorCompareTest, RelativeL2IsPerTensor) {
  TensorData a = f32({3.0f, 4.5f, 1e-9f});
  TensorData b = f32({3.0f, 4.0f, 0.0f});
  TensorDiff within = run(a, b, "rel_l2:0.1");
  EXPECT_DOUBLE_EQ(within.rel_l2, std::sqrt(0.25 + 1e-18) / 5.0);
  EXPECT_EQ(within.bit_mismatches, 2);
  EXPECT_EQ(within.mismatches, 0);  // within: no element is outside
  EXPECT_EQ(within.first_index, -1);
  EXPECT_FALSE(within.failed());
  TensorDiff outside = run(a, b, "rel_l2:0.0999");
  EXPECT_TRUE(outside.failed());
  EXPECT_EQ(outside.mismatches, 2);  // every differing element of a failing tensor
  EXPECT_EQ(outside.first_index, 1);
  EXPECT_EQ(outside.a_value, "4.5");
  EXPECT_NEAR(outside.max_limit_fraction, 0.1 / 0.0999, 1e-12);
  EXPECT_THAT(outside.describe(), ::testing::HasSubstr("relative L2 of the tensor 0.1"));
  // Equal tensors: 0 whatever ‖b‖; b = 0 and a ≠ 0: infinity; a NaN against a number fails.
  EXPECT_EQ(run(b, b, "rel_l2:0").rel_l2, 0.0);
  EXPECT_TRUE(std::isinf(run(f32({1.0f}), f32({0.0f}), "rel_l2:1e9").rel_l2));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(run(f32({nan, 4.0f}), f32({3.0f, 4.0f}), "rel_l2:1e9").failed());
  EXPECT_FALSE(run(f32({nan, 4.0f}), f32({nan, 4.0f}), "rel_l2:0").failed());
}

TEST(TensorCompareTest, IntegersAreExactUnderEveryClass) {
  TensorData a = TensorData::from_i32("tokens", {3}, {1, 2, -1});
  TensorData b = TensorData::from_i32("tokens", {3}, {1, 5, -1});
  for (const char* cls : {"bitwise", "ulp:100", "tol:1,1", "rel_l2:1", "differ"}) {
    SCOPED_TRACE(cls);
    TensorDiff d = run(a, b, cls);
    EXPECT_EQ(d.mismatches, 1);
    EXPECT_EQ(d.first_index, 1);
    EXPECT_EQ(d.a_value, "2");
    EXPECT_EQ(d.b_value, "5");
    EXPECT_EQ(d.a_bits, "0x00000002");
    EXPECT_EQ(d.b_bits, "0x00000005");
    EXPECT_EQ(d.max_ulp, 3u);
    EXPECT_EQ(d.max_abs, 3.0);
  }
  TensorDiff u = run(TensorData::from_u8("m", {2}, {0, 255}), TensorData::from_u8("m", {2}, {0, 1}),
                     "bitwise");
  EXPECT_EQ(u.a_value, "255");
  EXPECT_EQ(u.a_bits, "0xff");
  EXPECT_EQ(u.b_bits, "0x01");
  TensorData la;
  la.name = "l";
  la.dtype = DType::kI64;
  la.shape = {1};
  la.bytes.assign(8, 0xff);  // -1
  TensorData lb = la;
  lb.bytes.assign(8, 0);
  TensorDiff l = run(la, lb, "bitwise");
  EXPECT_EQ(l.a_value, "-1");
  EXPECT_EQ(l.a_bits, "0xffffffffffffffff");
  EXPECT_EQ(l.b_bits, "0x0000000000000000");
}

TEST(TensorCompareTest, CountsOverALargeTensor) {
  const int64_t n = int64_t{1} << 22;
  std::vector<float> va(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    va[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f;
  }
  std::vector<float> vb = va;
  for (int64_t i : {int64_t{12345}, int64_t{99999}, n - 1}) {
    vb[static_cast<size_t>(i)] = std::nextafter(va[static_cast<size_t>(i)], 1e30f);
  }
  vb[777777] = std::nextafter(std::nextafter(va[777777], 1e30f), 1e30f);
  TensorData a = TensorData::from_f32("big", {n / 1024, 1024}, va);
  TensorData b = TensorData::from_f32("big", {n / 1024, 1024}, vb);
  TensorDiff d = run(a, b, "ulp:1");
  EXPECT_EQ(d.numel, n);
  EXPECT_EQ(d.bit_mismatches, 4);
  EXPECT_EQ(d.mismatches, 1);
  EXPECT_EQ(d.max_ulp, 2u);
  EXPECT_EQ(d.first_index, 777777);
  EXPECT_THAT(d.first_coord, ElementsAre(777777 / 1024, 777777 % 1024));
  EXPECT_EQ(run(a, b, "bitwise").first_index, 12345);
}

TEST(TensorCompareTest, Unflatten) {
  EXPECT_THAT(unflatten(23, {2, 3, 4}), ElementsAre(1, 2, 3));
  EXPECT_THAT(unflatten(0, {2, 3, 4}), ElementsAre(0, 0, 0));
  EXPECT_THAT(unflatten(5, {6}), ElementsAre(5));
  EXPECT_TRUE(unflatten(0, {}).empty());
}

}  // namespace
}  // namespace mtp::compare
