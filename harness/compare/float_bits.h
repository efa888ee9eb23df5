// File: harness/compare/float_bits.h
//
// Bit-level views of the record's float formats (float32, float64, bfloat16, float16): NaN and
// inf tests, conversion to double, and the monotone "ordered" integer behind ULP distances.
// ordered() maps sign-magnitude bits to a signed integer that grows with the value, so adjacent
// floats differ by 1, +0 and −0 both map to 0, and the ULP distance is
// |ordered(a) − ordered(b)|.
// Internal to harness_compare.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace mtp::compare {

/// IEEE-style format with `ExpBits` exponent and `ManBits` mantissa bits stored in `U`.
template <typename U, int ExpBits, int ManBits>
struct FloatFormat {
  using Bits = U;
  static constexpr int kBits = 8 * static_cast<int>(sizeof(U));
  static constexpr U kSign = static_cast<U>(U{1} << (kBits - 1));
  static constexpr U kExp = static_cast<U>(((U{1} << ExpBits) - 1) << ManBits);
  static constexpr U kMan = static_cast<U>((U{1} << ManBits) - 1);

  static bool is_nan(U u) { return (u & kExp) == kExp && (u & kMan) != 0; }
  static bool is_inf(U u) { return (u & kExp) == kExp && (u & kMan) == 0; }

  /// The value as a monotone integer: −magnitude for negative values, +magnitude otherwise.
  static int64_t ordered(U u) {
    int64_t mag = static_cast<int64_t>(u & static_cast<U>(~kSign));
    return (u & kSign) != 0 ? -mag : mag;
  }
};

struct F32 : FloatFormat<uint32_t, 8, 23> {
  static double to_double(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
};

struct F64 : FloatFormat<uint64_t, 11, 52> {
  static double to_double(uint64_t u) {
    double d;
    std::memcpy(&d, &u, sizeof d);
    return d;
  }
};

/// bfloat16: the upper half of a float32.
struct BF16 : FloatFormat<uint16_t, 8, 7> {
  static double to_double(uint16_t u) { return F32::to_double(static_cast<uint32_t>(u) << 16); }
};

/// IEEE binary16.
struct F16 : FloatFormat<uint16_t, 5, 10> {
  static double to_double(uint16_t u) {
    double sign = (u & kSign) != 0 ? -1.0 : 1.0;
    int exp = (u & kExp) >> 10;
    int man = u & kMan;
    if (exp == 0) {
      return sign * std::ldexp(static_cast<double>(man), -24);  // zero or subnormal
    }
    if (exp == 31) {
      return man == 0 ? sign * INFINITY : std::copysign(NAN, sign);
    }
    return sign * std::ldexp(static_cast<double>(man + 1024), exp - 25);
  }
};

/// |x − y| of two ordered() values, exact over the whole int64 range.
inline uint64_t ordered_distance(int64_t x, int64_t y) {
  return x >= y ? static_cast<uint64_t>(x) - static_cast<uint64_t>(y)
                : static_cast<uint64_t>(y) - static_cast<uint64_t>(x);
}

}  // namespace mtp::compare
