// File: kernels/numerics.h
//
// The arithmetic every kernel in kernels/ shares, written once for the host and the device so
// that the CPU path and the CUDA path round the same way: the bf16 storage type and its
// round-to-nearest-even conversion, the accumulation type per input type, exp and log for fp32
// built from IEEE +, −, ×, ÷ only (the platform libraries' expf/logf differ between glibc and
// CUDA), and the fixed reduction orders (kRowLanes, kRmsNormDwRowsPerBlock, row_tree_reduce).
//
// For fp32 and bf16 inputs these are the only operations the kernels use, so CPU and GPU give the
// same bits provided neither side contracts a·b + c into an fma: the CPU library is compiled with
// -ffp-contract=off and the CUDA library with --fmad=false (kernels/CMakeLists.txt). fp64 uses the
// platform exp/log and may differ from CPU to GPU in the last bits; it exists for gradient checks.
//
// Example:
//   mtp::kernels::Bf16 h = mtp::kernels::to_bf16(1.0f / 3.0f);   // 0x3eab
//   float back = mtp::kernels::to_float(h);                       // 0.333984375
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MTP_KERNELS_HD __host__ __device__
#else
#define MTP_KERNELS_HD
#endif

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace mtp::kernels {

// ---------------------------------------------------------------------------------------------
// Reduction orders. Changing any constant changes results bit for bit (on CPU and GPU alike).

/// kRowLanes: the lane count of every reduction along one row (RMSNorm Σx² and Σg·x̂, the
/// cross-entropy max and Σexp). Lane l (0 ≤ l < kRowLanes) folds elements l, l + kRowLanes,
/// l + 2·kRowLanes, … in ascending order, starting from the fold's identity; then the lanes are
/// combined by a halving tree: for s = kRowLanes/2, …, 2, 1: lane[i] = op(lane[i], lane[i + s])
/// for i < s. The CUDA kernels run exactly kRowLanes threads per row; the CPU replays the same
/// order (row_tree_reduce). It is independent of the number of rows and of the launch.
constexpr int kRowLanes = 256;

/// kRmsNormDwRowsPerBlock: the RMSNorm weight gradient is summed over rows in two levels: rows
/// [64·b, 64·b + 64) are summed in ascending row order into block partial b (from +0), then the
/// block partials are summed in ascending b (from +0). Independent of threads and launches.
constexpr int kRmsNormDwRowsPerBlock = 64;

// ---------------------------------------------------------------------------------------------
// bf16

/// Bf16: a bfloat16 value stored as its 16 bits (the top half of an IEEE binary32). Same size,
/// alignment and bits as uint16_t, at::BFloat16 and __nv_bfloat16, so their buffers can be
/// passed where a Bf16* is expected.
struct Bf16 {
  uint16_t bits;
};
static_assert(sizeof(Bf16) == 2 && alignof(Bf16) == 2, "Bf16 must be a bare uint16_t");

/// float_bits / bits_float: the IEEE binary32 bit pattern of a float and back.
MTP_KERNELS_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}
MTP_KERNELS_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

/// to_bf16: float → bf16, round to nearest, ties to even. ±inf stay ±inf, finite values beyond
/// the bf16 range round to ±inf, every NaN becomes the quiet NaN 0x7fc0 (as c10::BFloat16).
MTP_KERNELS_HD inline Bf16 to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return Bf16{0x7fc0};
  }
  const uint32_t lsb = (u >> 16) & 1u;
  return Bf16{static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16)};
}

/// to_float: bf16 → float, exact.
MTP_KERNELS_HD inline float to_float(Bf16 h) {
  return bits_float(static_cast<uint32_t>(h.bits) << 16);
}

// ---------------------------------------------------------------------------------------------
// Accumulation type and loads/stores

/// AccType<T>::type: the type sums are carried in: fp32 for fp32 and bf16 inputs, fp64 for fp64.
template <typename T>
struct AccType;
template <>
struct AccType<float> {
  using type = float;
};
template <>
struct AccType<double> {
  using type = double;
};
template <>
struct AccType<Bf16> {
  using type = float;
};
template <typename T>
using Acc = typename AccType<T>::type;

/// load_acc: an input element widened (exactly) to its accumulation type.
MTP_KERNELS_HD inline float load_acc(float v) { return v; }
MTP_KERNELS_HD inline double load_acc(double v) { return v; }
MTP_KERNELS_HD inline float load_acc(Bf16 v) { return to_float(v); }

/// store_as<T>: an accumulator rounded to the output type (bf16: round to nearest even).
template <typename T>
MTP_KERNELS_HD inline T store_as(Acc<T> v);
template <>
MTP_KERNELS_HD inline float store_as<float>(float v) {
  return v;
}
template <>
MTP_KERNELS_HD inline double store_as<double>(double v) {
  return v;
}
template <>
MTP_KERNELS_HD inline Bf16 store_as<Bf16>(float v) {
  return to_bf16(v);
}

// ---------------------------------------------------------------------------------------------
// Elementary functions

/// pow2_f32: 2^k as a float, for -126 ≤ k ≤ 127 (exact).
MTP_KERNELS_HD inline float pow2_f32(int k) {
  return bits_float(static_cast<uint32_t>(k + 127) << 23);
}

/// exp_f32: e^x for fp32 in IEEE +, −, × and exponent assembly only, so the CPU and the GPU
/// give the same bits. Cody–Waite reduction x = k·ln2 + r, |r| ≲ ln2/2, with ln2 split in a
/// 15-bit head (k·head exact) and a tail; e^r by its degree-8 Taylor polynomial in Horner form
/// (truncation < 2e-9 relative); then scaling by 2^k in at most two exact steps (one rounding
/// into the subnormal range). Measured error ≤ 2 ulp (numerics_test). NaN → NaN; x > ln(FLT_MAX)
/// → +inf; x < −103.98 → +0.
MTP_KERNELS_HD inline float exp_f32(float x) {
  if (x != x) {
    return x;
  }
  if (x > 88.72283935546875f) {
    return bits_float(0x7f800000u);
  }
  if (x < -103.9720840454f) {
    return 0.0f;
  }
  const float t = x * 1.44269502162933349609375f;  // log2(e) rounded to float
  const int k = static_cast<int>(t >= 0.0f ? t + 0.5f : t - 0.5f);
  const float kf = static_cast<float>(k);
  const float ln2_hi = 0.693145751953125f;         // 0x3f317200: 15 significant bits
  const float ln2_lo = 1.428606765330187045e-06f;  // ln 2 − ln2_hi
  const float r = (x - kf * ln2_hi) - kf * ln2_lo;
  float p = 2.4801587301587302e-05f;    // 1/8!
  p = 1.9841269841269841e-04f + r * p;  // 1/7!
  p = 1.3888888888888889e-03f + r * p;  // 1/6!
  p = 8.3333333333333333e-03f + r * p;  // 1/5!
  p = 4.1666666666666667e-02f + r * p;  // 1/4!
  p = 1.6666666666666667e-01f + r * p;  // 1/3!
  p = 0.5f + r * p;
  p = 1.0f + r * p;
  p = 1.0f + r * p;
  if (k > 127) {
    return (p * pow2_f32(127)) * pow2_f32(k - 127);
  }
  if (k < -126) {
    return (p * pow2_f32(k + 100)) * pow2_f32(-100);
  }
  return p * pow2_f32(k);
}

/// log_f32: natural log for fp32 in IEEE +, −, ×, ÷ and exponent extraction only. x = m·2^e with
/// m in [√½, √2); ln m = 2·atanh(f), f = (m − 1)/(m + 1), |f| ≤ 0.1716, by its odd series through
/// f¹³/13 (truncation < 1e-10); ln x = e·ln2_hi + (ln m + e·ln2_lo). Measured error ≤ 2 ulp
/// (numerics_test). x < 0 or NaN → NaN, ±0 → −inf, +inf → +inf; subnormals handled.
MTP_KERNELS_HD inline float log_f32(float x) {
  if (x != x || x < 0.0f) {
    return bits_float(0x7fc00000u);
  }
  if (x == 0.0f) {
    return bits_float(0xff800000u);
  }
  if (x == bits_float(0x7f800000u)) {
    return x;
  }
  int e = 0;
  uint32_t u = float_bits(x);
  if ((u >> 23) == 0) {  // subnormal: scale by 2^25 (exact) into the normal range
    u = float_bits(x * pow2_f32(25));
    e = -25;
  }
  e += static_cast<int>(u >> 23) - 127;
  float m = bits_float((u & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  if (m > 1.41421353816986083984375f) {
    m = m * 0.5f;
    e += 1;
  }
  const float f = (m - 1.0f) / (m + 1.0f);
  const float f2 = f * f;
  float s = 7.6923076923076923e-02f;     // 1/13
  s = 9.0909090909090909e-02f + f2 * s;  // 1/11
  s = 1.1111111111111111e-01f + f2 * s;  // 1/9
  s = 1.4285714285714286e-01f + f2 * s;  // 1/7
  s = 2.0000000000000000e-01f + f2 * s;  // 1/5
  s = 3.3333333333333333e-01f + f2 * s;  // 1/3
  const float log_m = 2.0f * (f + f * (f2 * s));
  const float ef = static_cast<float>(e);
  return ef * 0.693145751953125f + (log_m + ef * 1.428606765330187045e-06f);
}

/// exp_acc / log_acc / sqrt_acc: the accumulation-type functions the kernels call. fp32: the
/// functions above and IEEE sqrt (correctly rounded on both sides: SSE sqrtss, CUDA sqrtf with
/// -prec-sqrt=true); fp64: the platform functions (CPU and GPU may differ in the last bit).
MTP_KERNELS_HD inline float exp_acc(float x) { return exp_f32(x); }
MTP_KERNELS_HD inline float log_acc(float x) { return log_f32(x); }
MTP_KERNELS_HD inline float sqrt_acc(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}
MTP_KERNELS_HD inline double exp_acc(double x) {
#if defined(__CUDA_ARCH__)
  return ::exp(x);
#else
  return std::exp(x);
#endif
}
MTP_KERNELS_HD inline double log_acc(double x) {
#if defined(__CUDA_ARCH__)
  return ::log(x);
#else
  return std::log(x);
#endif
}
MTP_KERNELS_HD inline double sqrt_acc(double x) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

/// quiet_nan<A>: a quiet NaN of the accumulation type (what the CUDA kernels write for an
/// out-of-range label).
template <typename A>
MTP_KERNELS_HD inline A quiet_nan();
template <>
MTP_KERNELS_HD inline float quiet_nan<float>() {
  return bits_float(0x7fc00000u);
}
template <>
MTP_KERNELS_HD inline double quiet_nan<double>() {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(0x7ff8000000000000ll);
#else
  const uint64_t u = 0x7ff8000000000000ull;
  double d;
  std::memcpy(&d, &u, sizeof(d));
  return d;
#endif
}

/// max_nan: the max used by the cross-entropy row max. A NaN operand wins (the first one met in
/// the fixed order), so a NaN logit gives a NaN loss; between equal values (+0/−0) the left one
/// is kept.
template <typename A>
MTP_KERNELS_HD inline A max_nan(A a, A b) {
  if (a != a) {
    return a;
  }
  if (b != b || b > a) {
    return b;
  }
  return a;
}

// ---------------------------------------------------------------------------------------------
// The row reduction order, host replay

/// row_tree_reduce: folds load(0..n−1) with `op` in the kRowLanes order (see kRowLanes), starting
/// each lane from `identity`. Host-only replay of what the CUDA kernels do with kRowLanes
/// threads; `load(j)` must compute the element exactly as the device does.
template <typename A, typename Load, typename Op>
inline A row_tree_reduce(int64_t n, A identity, Load load, Op op) {
  A lanes[kRowLanes];
  for (int l = 0; l < kRowLanes; ++l) {
    lanes[l] = identity;
  }
  for (int64_t base = 0; base < n; base += kRowLanes) {
    const int64_t width = n - base < kRowLanes ? n - base : kRowLanes;
    for (int64_t l = 0; l < width; ++l) {
      lanes[l] = op(lanes[l], load(base + l));
    }
  }
  for (int s = kRowLanes / 2; s > 0; s >>= 1) {
    for (int i = 0; i < s; ++i) {
      lanes[i] = op(lanes[i], lanes[i + s]);
    }
  }
  return lanes[0];
}

}  // namespace mtp::kernels
