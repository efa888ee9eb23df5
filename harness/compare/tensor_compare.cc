#include "harness/compare/tensor_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "harness/compare/float_bits.h"

namespace mtp::compare {
namespace {

using record::DType;
using Kind = CompareClass::Kind;

template <typename U>
U load(const uint8_t* p, int64_t i) {
  U u;
  std::memcpy(&u, p + i * static_cast<int64_t>(sizeof(U)), sizeof(U));
  return u;
}

/// "0x3f800000": the bit pattern in hex, two digits per byte.
std::string bits_string(uint64_t bits, size_t bytes) {
  return fmt::format("0x{:0{}x}", bits, 2 * bytes);
}

/// |a − b| ≤ ATOL + RTOL·|b|; NaN only equals NaN, inf only the same inf.
bool within_tol(double a, double b, bool a_nan, bool b_nan, const CompareClass& cls) {
  if (a_nan || b_nan) {
    return a_nan && b_nan;
  }
  if (std::isinf(a) || std::isinf(b)) {
    return a == b;
  }
  return std::fabs(a - b) <= cls.atol + cls.rtol * std::fabs(b);
}

template <class F>
void compare_float(const uint8_t* pa, const uint8_t* pb, int64_t first, int64_t n,
                   const CompareClass& cls, TensorDiff& d) {
  using U = typename F::Bits;
  for (int64_t i = 0; i < n; ++i) {
    U ua = load<U>(pa, i);
    U ub = load<U>(pb, i);
    if (ua == ub) {
      continue;  // same bits: 0 ULP, within every class
    }
    ++d.bit_mismatches;
    bool a_nan = F::is_nan(ua);
    bool b_nan = F::is_nan(ub);
    double va = F::to_double(ua);
    double vb = F::to_double(ub);
    uint64_t ulp;
    if (a_nan || b_nan) {
      ulp = a_nan && b_nan ? 0 : std::numeric_limits<uint64_t>::max();
    } else {
      ulp = ordered_distance(F::ordered(ua), F::ordered(ub));
      if (std::isfinite(va) && std::isfinite(vb)) {
        const double diff = std::fabs(va - vb);
        d.max_abs = std::max(d.max_abs, diff);
        // Relative to |b|, over pairs where b is at least 1e-3 of the tensor's typical scale is
        // not known in one pass; use |b| > 1e-6 so that noise around zero does not dominate.
        if (std::fabs(vb) > 1e-6) d.max_rel = std::max(d.max_rel, diff / std::fabs(vb));
      }
    }
    d.max_ulp = std::max(d.max_ulp, ulp);
    bool outside = true;  // bitwise and differ: any bit difference; rel_l2 until finish_values
    if (cls.kind == Kind::kRelL2) {
      if (std::isfinite(va) && std::isfinite(vb)) {
        d.sum_sq_diff += (va - vb) * (va - vb);
      } else if (!(a_nan && b_nan)) {
        d.nonfinite_diff = true;
      } else {
        outside = false;  // NaN against NaN: equal, as under tol
      }
    }
    if (cls.kind == Kind::kUlp) {
      outside = ulp > static_cast<uint64_t>(cls.max_ulp);
      d.max_limit_fraction =
          std::max(d.max_limit_fraction,
                   cls.max_ulp == 0 ? (ulp == 0 ? 0.0 : INFINITY)
                                    : static_cast<double>(ulp) / static_cast<double>(cls.max_ulp));
    } else if (cls.kind == Kind::kTol) {
      outside = !within_tol(va, vb, a_nan, b_nan, cls);
      const double limit = cls.atol + cls.rtol * std::fabs(vb);
      const double used = a_nan || b_nan || std::isinf(va) || std::isinf(vb)
                              ? (outside ? INFINITY : 0.0)
                          : limit > 0.0 ? std::fabs(va - vb) / limit
                          : va == vb    ? 0.0
                                        : INFINITY;
      d.max_limit_fraction = std::max(d.max_limit_fraction, used);
    }
    if (!outside) {
      continue;
    }
    ++d.mismatches;
    if (d.first_index < 0) {
      d.first_index = first + i;
      d.a_value = fmt::format("{:.17g}", va);
      d.b_value = fmt::format("{:.17g}", vb);
      d.a_bits = bits_string(ua, sizeof(U));
      d.b_bits = bits_string(ub, sizeof(U));
    }
  }
}

/// Integers are exact under every class.
template <typename T>
void compare_int(const uint8_t* pa, const uint8_t* pb, int64_t first, int64_t n, TensorDiff& d) {
  using U = std::make_unsigned_t<T>;
  for (int64_t i = 0; i < n; ++i) {
    T x = load<T>(pa, i);
    T y = load<T>(pb, i);
    if (x == y) {
      continue;
    }
    ++d.bit_mismatches;
    ++d.mismatches;
    d.max_ulp = std::max(d.max_ulp, ordered_distance(x, y));  // adjacent integers: 1 apart
    d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(x) - static_cast<double>(y)));
    if (d.first_index < 0) {
      d.first_index = first + i;
      d.a_value = fmt::format("{}", static_cast<int64_t>(x));
      d.b_value = fmt::format("{}", static_cast<int64_t>(y));
      d.a_bits = bits_string(static_cast<U>(x), sizeof(T));
      d.b_bits = bits_string(static_cast<U>(y), sizeof(T));
    }
  }
}

}  // namespace

std::vector<int64_t> unflatten(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> coord(shape.size(), 0);
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] > 0) {
      coord[k] = flat % shape[k];
      flat /= shape[k];
    }
  }
  return coord;
}

namespace {

/// Σ b² over the chunk's finite elements (rel_l2's denominator), float64, in index order.
template <class F>
double sum_of_squares(const uint8_t* pb, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = F::to_double(load<typename F::Bits>(pb, i));
    if (std::isfinite(v)) s += v * v;
  }
  return s;
}

}  // namespace

void finish_values(const CompareClass& cls, record::DType dtype, TensorDiff& d) {
  if (cls.kind != Kind::kRelL2 || !record::dtype_is_float(dtype)) return;
  const double num = std::sqrt(d.sum_sq_diff);
  const double den = std::sqrt(d.sum_sq_b);
  d.rel_l2 = d.nonfinite_diff ? INFINITY : num == 0.0 ? 0.0 : den == 0.0 ? INFINITY : num / den;
  const double bound = cls.max_rel_l2;
  d.max_limit_fraction = bound > 0.0 ? d.rel_l2 / bound : (d.rel_l2 == 0.0 ? 0.0 : INFINITY);
  if (d.rel_l2 <= bound) {
    d.mismatches = 0;
    d.first_index = -1;
    d.first_coord.clear();
    d.a_value.clear();
    d.b_value.clear();
    d.a_bits.clear();
    d.b_bits.clear();
  }
}

void compare_chunk(const uint8_t* pa, const uint8_t* pb, int64_t first, int64_t n,
                   record::DType dtype, const CompareClass& cls, TensorDiff& diff) {
  const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(record::dtype_size(dtype));
  if (cls.kind == Kind::kRelL2 && bytes > 0) {
    switch (dtype) {
      case DType::kF32:
        diff.sum_sq_b += sum_of_squares<F32>(pb, n);
        break;
      case DType::kF64:
        diff.sum_sq_b += sum_of_squares<F64>(pb, n);
        break;
      case DType::kBF16:
        diff.sum_sq_b += sum_of_squares<BF16>(pb, n);
        break;
      case DType::kF16:
        diff.sum_sq_b += sum_of_squares<F16>(pb, n);
        break;
      default:
        break;  // integers are exact under every class
    }
  }
  if (bytes == 0 || std::memcmp(pa, pb, bytes) == 0) {
    return;
  }
  switch (dtype) {
    case DType::kF32:
      compare_float<F32>(pa, pb, first, n, cls, diff);
      break;
    case DType::kF64:
      compare_float<F64>(pa, pb, first, n, cls, diff);
      break;
    case DType::kBF16:
      compare_float<BF16>(pa, pb, first, n, cls, diff);
      break;
    case DType::kF16:
      compare_float<F16>(pa, pb, first, n, cls, diff);
      break;
    case DType::kI32:
      compare_int<int32_t>(pa, pb, first, n, diff);
      break;
    case DType::kI64:
      compare_int<int64_t>(pa, pb, first, n, diff);
      break;
    case DType::kU8:
      compare_int<uint8_t>(pa, pb, first, n, diff);
      break;
  }
}

void compare_values(const record::TensorData& a, const record::TensorData& b,
                    const CompareClass& cls, TensorDiff& diff) {
  MTP_INTERNAL_ASSERT(a.dtype == b.dtype && a.shape == b.shape,
                      fmt::format("compare_values on '{}' with different dtype or shape", a.name));
  int64_t n = a.numel();
  size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(record::dtype_size(a.dtype));
  MTP_INTERNAL_ASSERT(a.bytes.size() == bytes && b.bytes.size() == bytes,
                      fmt::format("tensor '{}': byte count does not match its shape", a.name));
  diff.numel = n;
  compare_chunk(a.bytes.data(), b.bytes.data(), 0, n, a.dtype, cls, diff);
  finish_values(cls, a.dtype, diff);
  if (diff.first_index >= 0) {
    diff.first_coord = unflatten(diff.first_index, a.shape);
  }
}

}  // namespace mtp::compare
