#include "harness/model/params.h"

#include <xxhash.h>

#include <cmath>

#include <fmt/format.h>

namespace mtp::model {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A double in (0, 1] from the top 53 bits.
double unit_open_closed(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53;
}
// A double in [0, 1) from the top 53 bits.
double unit_closed_open(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace

at::Tensor initial_value(const config::ParamSpec& spec, uint64_t seed) {
  auto t = at::empty(spec.shape, at::TensorOptions().dtype(at::kDouble));
  double* p = t.data_ptr<double>();
  const int64_t n = t.numel();
  if (spec.init_std == 0.0) {
    for (int64_t i = 0; i < n; ++i) p[i] = 1.0;
    return t;
  }
  const uint64_t key = XXH3_64bits_withSeed(spec.name.data(), spec.name.size(), seed);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t a = splitmix64(key + 2 * static_cast<uint64_t>(i));
    const uint64_t b = splitmix64(key + 2 * static_cast<uint64_t>(i) + 1);
    const double r = std::sqrt(-2.0 * std::log(unit_open_closed(a)));
    p[i] = spec.init_std * r * std::cos(kTwoPi * unit_closed_open(b));
  }
  return t;
}

}  // namespace mtp::model
