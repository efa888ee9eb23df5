// File: kernels/testing/testbed.h
//
// Shared test support for the kernel tests (CPU and CUDA): seeded inputs (seeds from a stable
// FNV-1a hash of a name, never std::hash), float64 references written directly from the
// formulas, per-dtype tolerances, bitwise and tolerance comparisons that name the first
// mismatch as [row, column] with both values and bit patterns. Header-only, no LibTorch.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/numerics.h"

namespace mtp::kernels::testing {

// --- inputs ------------------------------------------------------------------------------------

/// stable_seed: FNV-1a 64 of `name`, the same on every platform and build.
inline uint64_t stable_seed(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

/// to_double / from_double: exact widening of a stored value; rounding of a double to T
/// (through float for bf16: double → float → bf16, used for inputs only).
inline double to_double(float v) { return v; }
inline double to_double(double v) { return v; }
inline double to_double(Bf16 v) { return to_float(v); }
template <typename T>
T from_double(double v);
template <>
inline float from_double<float>(double v) {
  return static_cast<float>(v);
}
template <>
inline double from_double<double>(double v) {
  return v;
}
template <>
inline Bf16 from_double<Bf16>(double v) {
  return to_bf16(static_cast<float>(v));
}

template <typename T>
std::vector<double> widen(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = to_double(v[i]);
  }
  return out;
}

/// normal: n values mean + stddev·N(0, 1), stored as T.
template <typename T>
std::vector<T> normal(size_t n, std::mt19937_64& rng, double mean = 0.0, double stddev = 1.0) {
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<T> out(n);
  for (auto& v : out) {
    v = from_double<T>(dist(rng));
  }
  return out;
}

/// uniform_ids: n int64 values in [0, limit) whose ids are multiples of `step` (so rows not on
/// the step stay empty).
inline std::vector<int64_t> uniform_ids(size_t n, int64_t limit, int64_t step,
                                        std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> dist(0, std::max<int64_t>(0, (limit - 1) / step));
  std::vector<int64_t> out(n);
  for (auto& v : out) {
    v = dist(rng) * step;
  }
  return out;
}

/// mask01: n values 0 or 1 (about a quarter 0), as A.
template <typename A>
std::vector<A> mask01(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> dist(0, 3);
  std::vector<A> out(n);
  for (auto& v : out) {
    v = dist(rng) == 0 ? A(0) : A(1);
  }
  return out;
}

/// poisoned: n elements whose bytes are all `byte` (0xff: NaN for every float type).
template <typename T>
std::vector<T> poisoned(size_t n, unsigned char byte) {
  std::vector<T> out(n);
  if (n > 0) {
    std::memset(static_cast<void*>(out.data()), byte, n * sizeof(T));
  }
  return out;
}

// --- tolerances --------------------------------------------------------------------------------

/// Tolerance: |got − ref| ≤ rtol·|ref| + atol·max|ref| (atol relative to the tensor's scale).
struct Tolerance {
  double rtol;
  double atol;
};

/// rounded_tolerance<T>: for outputs stored as T (fp32: 1e-6, fp64: 1e-12, bf16: 1e-2: one bf16
/// rounding is ≤ 2^-9 relative, plus fp32 accumulation).
template <typename T>
Tolerance rounded_tolerance();
template <>
inline Tolerance rounded_tolerance<float>() {
  return {1e-6, 1e-6};
}
template <>
inline Tolerance rounded_tolerance<double>() {
  return {1e-12, 1e-12};
}
template <>
inline Tolerance rounded_tolerance<Bf16>() {
  return {1e-2, 1e-2};
}
/// acc_tolerance<T>: for outputs stored in Acc<T> (bf16 inputs: fp32 results, fp32 tolerance).
template <typename T>
Tolerance acc_tolerance() {
  return rounded_tolerance<Acc<T>>();
}

// --- comparisons -------------------------------------------------------------------------------

inline std::string bits_hex(float v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(8) << std::setfill('0') << float_bits(v);
  return os.str();
}
inline std::string bits_hex(double v) {
  uint64_t u;
  std::memcpy(&u, &v, sizeof(u));
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(16) << std::setfill('0') << u;
  return os.str();
}
inline std::string bits_hex(Bf16 v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(4) << std::setfill('0') << v.bits;
  return os.str();
}

inline std::string position(size_t i, int64_t width) {
  if (width <= 0) {
    return "[" + std::to_string(i) + "]";
  }
  return "[" + std::to_string(static_cast<int64_t>(i) / width) + ", " +
         std::to_string(static_cast<int64_t>(i) % width) + "]";
}

/// close: every element within `tol` of the float64 reference (NaN only where the reference is
/// NaN); on failure the count, the worst element and the first mismatch.
inline ::testing::AssertionResult close(const std::string& what, const std::vector<double>& got,
                                        const std::vector<double>& ref, Tolerance tol,
                                        int64_t width = 0) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure()
           << what << ": size " << got.size() << " vs reference " << ref.size();
  }
  double scale = 0.0;
  for (double r : ref) {
    if (std::isfinite(r)) {
      scale = std::max(scale, std::fabs(r));
    }
  }
  size_t bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isnan(ref[i]) ? std::isnan(got[i])
                                       : std::fabs(got[i] - ref[i]) <=
                                             tol.rtol * std::fabs(ref[i]) + tol.atol * scale;
    if (!ok && bad++ == 0) {
      first = i;
    }
  }
  if (bad == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << got.size() << " elements outside rtol " << tol.rtol
         << " + atol " << tol.atol << "·" << scale << "; first " << position(first, width)
         << ": got " << std::setprecision(17) << got[first] << ", reference " << ref[first];
}

/// bitwise_equal: the two buffers have the same bytes; on failure the count and the first
/// differing element with both values and bit patterns.
template <typename T>
::testing::AssertionResult bitwise_equal(const std::string& what, const std::vector<T>& a,
                                         const std::vector<T>& b, int64_t width = 0) {
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << what << ": size " << a.size() << " vs " << b.size();
  }
  size_t bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0 && bad++ == 0) {
      first = i;
    }
  }
  if (bad == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << a.size() << " elements differ; first "
         << position(first, width) << ": " << std::setprecision(17) << to_double(a[first]) << " ("
         << bits_hex(a[first]) << ") vs " << to_double(b[first]) << " (" << bits_hex(b[first])
         << ")";
}

/// any_nan: whether some element is NaN.
template <typename T>
bool any_nan(const std::vector<T>& v) {
  for (const auto& x : v) {
    if (std::isnan(to_double(x))) {
      return true;
    }
  }
  return false;
}

// --- float64 references, straight from the formulas ---------------------------------------------

inline std::vector<double> ref_embedding_backward(const std::vector<double>& grad_out,
                                                  const std::vector<int64_t>& ids, int64_t hidden,
                                                  int64_t vocab) {
  std::vector<double> table(static_cast<size_t>(vocab * hidden), 0.0);
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int64_t h = 0; h < hidden; ++h) {
      table[ids[t] * hidden + h] += grad_out[t * hidden + h];
    }
  }
  return table;
}

struct RmsForwardRef {
  std::vector<double> y, rstd;
};
inline RmsForwardRef ref_rms_norm_forward(const std::vector<double>& x,
                                          const std::vector<double>& w, int64_t rows,
                                          int64_t hidden, double eps) {
  RmsForwardRef out{std::vector<double>(x.size()), std::vector<double>(rows)};
  for (int64_t n = 0; n < rows; ++n) {
    double ss = 0.0;
    for (int64_t j = 0; j < hidden; ++j) {
      ss += x[n * hidden + j] * x[n * hidden + j];
    }
    const double r = 1.0 / std::sqrt(ss / hidden + eps);
    out.rstd[n] = r;
    for (int64_t j = 0; j < hidden; ++j) {
      out.y[n * hidden + j] = x[n * hidden + j] * r * w[j];
    }
  }
  return out;
}

struct RmsBackwardRef {
  std::vector<double> dx, dw;
};
inline RmsBackwardRef ref_rms_norm_backward(const std::vector<double>& dy,
                                            const std::vector<double>& x,
                                            const std::vector<double>& w, int64_t rows,
                                            int64_t hidden, double eps) {
  const auto fwd = ref_rms_norm_forward(x, w, rows, hidden, eps);
  RmsBackwardRef out{std::vector<double>(x.size()), std::vector<double>(hidden, 0.0)};
  for (int64_t n = 0; n < rows; ++n) {
    const double r = fwd.rstd[n];
    double dot = 0.0;
    for (int64_t j = 0; j < hidden; ++j) {
      dot += dy[n * hidden + j] * w[j] * x[n * hidden + j] * r;
    }
    for (int64_t j = 0; j < hidden; ++j) {
      const double xhat = x[n * hidden + j] * r;
      out.dx[n * hidden + j] = r * (dy[n * hidden + j] * w[j] - xhat * dot / hidden);
      out.dw[j] += dy[n * hidden + j] * xhat;
    }
  }
  return out;
}

struct CeRef {
  std::vector<double> loss, grad_logits;
};
/// mask and grad_loss may be empty (all ones).
inline CeRef ref_cross_entropy(const std::vector<double>& logits,
                               const std::vector<int64_t>& labels, const std::vector<double>& mask,
                               const std::vector<double>& grad_loss, int64_t rows, int64_t vocab) {
  CeRef out{std::vector<double>(rows), std::vector<double>(logits.size())};
  for (int64_t n = 0; n < rows; ++n) {
    const double* l = logits.data() + n * vocab;
    const double mx = *std::max_element(l, l + vocab);
    double sum = 0.0;
    for (int64_t j = 0; j < vocab; ++j) {
      sum += std::exp(l[j] - mx);
    }
    const double m = mask.empty() ? 1.0 : mask[n];
    const double g = grad_loss.empty() ? 1.0 : grad_loss[n];
    out.loss[n] = (std::log(sum) - (l[labels[n]] - mx)) * m;
    for (int64_t j = 0; j < vocab; ++j) {
      const double p = std::exp(l[j] - mx) / sum;
      out.grad_logits[n * vocab + j] = (p - (j == labels[n] ? 1.0 : 0.0)) * g * m;
    }
  }
  return out;
}

// --- problems and CPU runs (the CUDA test mirrors the runs on the device) ------------------------

/// EmbeddingProblem: grad_out [T, H] ~ N(0, 1); ids in [0, V) on even rows only (odd rows of the
/// table receive nothing), many repeats when T > V.
template <typename T>
struct EmbeddingProblem {
  int64_t tokens = 0, hidden = 0, vocab = 0;
  std::vector<T> grad_out;
  std::vector<int64_t> ids;
  static EmbeddingProblem make(int64_t tokens, int64_t hidden, int64_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    EmbeddingProblem p;
    p.tokens = tokens;
    p.hidden = hidden;
    p.vocab = vocab;
    p.grad_out = normal<T>(static_cast<size_t>(tokens * hidden), rng);
    p.ids = uniform_ids(static_cast<size_t>(tokens), vocab, 2, rng);
    return p;
  }
};

/// RmsProblem: x ~ N(0, 2²) [N, H], w ~ 1 + N(0, 0.1²) [H], dy ~ N(0, 1) [N, H], eps 1e-5.
template <typename T>
struct RmsProblem {
  int64_t rows = 0, hidden = 0;
  double eps = 1e-5;
  std::vector<T> x, w, dy;
  static RmsProblem make(int64_t rows, int64_t hidden, uint64_t seed) {
    std::mt19937_64 rng(seed);
    RmsProblem p;
    p.rows = rows;
    p.hidden = hidden;
    p.x = normal<T>(static_cast<size_t>(rows * hidden), rng, 0.0, 2.0);
    p.w = normal<T>(static_cast<size_t>(hidden), rng, 1.0, 0.1);
    p.dy = normal<T>(static_cast<size_t>(rows * hidden), rng);
    return p;
  }
  /// The 1-row problem of row r (same weight).
  RmsProblem row(int64_t r) const {
    RmsProblem p = *this;
    p.rows = 1;
    p.x.assign(x.begin() + r * hidden, x.begin() + (r + 1) * hidden);
    p.dy.assign(dy.begin() + r * hidden, dy.begin() + (r + 1) * hidden);
    return p;
  }
};

/// CeProblem: logits ~ N(0, 3²) [N, V], labels uniform in [0, V), mask 0/1 (about ¼ zeros),
/// grad_loss ~ N(0, 1).
template <typename T>
struct CeProblem {
  using A = Acc<T>;
  int64_t rows = 0, vocab = 0;
  std::vector<T> logits;
  std::vector<int64_t> labels;
  std::vector<A> mask, grad_loss;
  static CeProblem make(int64_t rows, int64_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    CeProblem p;
    p.rows = rows;
    p.vocab = vocab;
    p.logits = normal<T>(static_cast<size_t>(rows * vocab), rng, 0.0, 3.0);
    p.labels = uniform_ids(static_cast<size_t>(rows), vocab, 1, rng);
    p.mask = mask01<A>(static_cast<size_t>(rows), rng);
    p.grad_loss = normal<A>(static_cast<size_t>(rows), rng);
    return p;
  }
  CeProblem row(int64_t r) const {
    CeProblem p = *this;
    p.rows = 1;
    p.logits.assign(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
    p.labels = {labels[r]};
    p.mask = {mask[r]};
    p.grad_loss = {grad_loss[r]};
    return p;
  }
};

template <typename T>
struct RmsOutputs {
  std::vector<T> y;
  std::vector<Acc<T>> rstd;
  std::vector<T> dx, dw;
};
template <typename T>
struct CeOutputs {
  std::vector<Acc<T>> loss, row_max, row_sum;
  std::vector<T> grad_logits;
};

/// run_cpu: the CPU kernels on a problem, outputs pre-filled with `poison` bytes. The RMSNorm
/// backward uses the forward's rstd; the cross-entropy backward the forward's row statistics.
template <typename T>
std::vector<T> run_cpu(const EmbeddingProblem<T>& p, unsigned char poison) {
  auto table = poisoned<T>(static_cast<size_t>(p.vocab * p.hidden), poison);
  cpu::embedding_backward<T>(p.grad_out.data(), p.ids.data(), p.tokens, p.hidden, p.vocab,
                             table.data());
  return table;
}
template <typename T>
RmsOutputs<T> run_cpu(const RmsProblem<T>& p, unsigned char poison) {
  const size_t n = static_cast<size_t>(p.rows * p.hidden);
  RmsOutputs<T> o{poisoned<T>(n, poison), poisoned<Acc<T>>(static_cast<size_t>(p.rows), poison),
                  poisoned<T>(n, poison), poisoned<T>(static_cast<size_t>(p.hidden), poison)};
  cpu::rms_norm_forward<T>(p.x.data(), p.w.data(), p.rows, p.hidden, p.eps, o.y.data(),
                           o.rstd.data());
  cpu::rms_norm_backward<T>(p.dy.data(), p.x.data(), p.w.data(), o.rstd.data(), p.rows, p.hidden,
                            o.dx.data(), o.dw.data());
  return o;
}
template <typename T>
CeOutputs<T> run_cpu(const CeProblem<T>& p, unsigned char poison, bool masked = true) {
  using A = Acc<T>;
  const size_t rows = static_cast<size_t>(p.rows);
  CeOutputs<T> o{poisoned<A>(rows, poison), poisoned<A>(rows, poison), poisoned<A>(rows, poison),
                 poisoned<T>(static_cast<size_t>(p.rows * p.vocab), poison)};
  const A* mask = masked ? p.mask.data() : nullptr;
  cpu::cross_entropy_forward<T>(p.logits.data(), p.labels.data(), mask, p.rows, p.vocab,
                                o.loss.data(), o.row_max.data(), o.row_sum.data());
  cpu::cross_entropy_backward<T>(p.logits.data(), p.labels.data(), mask, p.grad_loss.data(),
                                 o.row_max.data(), o.row_sum.data(), p.rows, p.vocab,
                                 o.grad_logits.data());
  return o;
}

/// The shapes every kernel test sweeps: widths around the kRowLanes boundaries, row counts
/// around the kRmsNormDwRowsPerBlock boundaries, vocabularies with and without repeats.
struct Shape2 {
  int64_t rows, cols;
};
inline std::vector<Shape2> rms_shapes() {
  // (H = 1 is left out: there dx = r·g·(1 − x̂²) cancels to ~eps/x², ill-conditioned in fp32.)
  return {{1, 2}, {3, 255}, {5, 256}, {7, 257}, {64, 64}, {65, 3}, {130, 100}, {9, 1000}};
}
inline std::vector<Shape2> ce_shapes() {
  return {{1, 1}, {4, 255}, {9, 256}, {17, 1000}, {3, 5000}};
}
struct Shape3 {
  int64_t tokens, hidden, vocab;
};
inline std::vector<Shape3> embedding_shapes() {
  return {{0, 8, 5}, {1, 1, 1}, {37, 17, 11}, {300, 64, 40}, {1000, 5, 1000}, {64, 300, 7}};
}

/// The input types every kernel takes, for typed tests, with readable names (fp32, fp64, bf16).
using InputTypes = ::testing::Types<float, double, Bf16>;
class TypeNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same<T, float>::value) return "fp32";
    if (std::is_same<T, double>::value) return "fp64";
    return "bf16";
  }
};

/// A seed that depends only on the running test's suite and name and on `what`.
inline uint64_t current_test_seed(const std::string& what) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return stable_seed(std::string(info->test_suite_name()) + "/" + info->name() + "/" + what);
}

}  // namespace mtp::kernels::testing
