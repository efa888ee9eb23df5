#include "harness/perf/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace mtp::perf {
namespace {

/// 1 − Φ(z), the standard normal survival function.
double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

/// z and p from U1, the sample sizes and Σ(t³ − t) over the groups of ties.
MannWhitneyResult from_u(double u1, double n1, double n2, double tie_term) {
  MannWhitneyResult r;
  r.u1 = u1;
  r.u2 = n1 * n2 - u1;
  const double n = n1 + n2;
  const double mu = n1 * n2 / 2.0;
  const double variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
  const double numerator = std::max(r.u1, r.u2) - mu - 0.5;
  if (!(variance > 0.0)) {  // every value equal (or n = 2 with a tie): no evidence either way
    r.z = -std::numeric_limits<double>::infinity();
    r.p_value = 1.0;
    return r;
  }
  r.z = numerator / std::sqrt(variance);
  r.p_value = std::min(1.0, 2.0 * normal_sf(r.z));
  return r;
}

void check_sample(const std::vector<double>& v, const char* which) {
  if (v.empty()) {
    throw std::invalid_argument(std::string("mann_whitney_u_test: sample ") + which + " is empty");
  }
  for (double d : v) {
    if (std::isnan(d)) {
      throw std::invalid_argument(std::string("mann_whitney_u_test: sample ") + which +
                                  " holds a NaN");
    }
  }
}

}  // namespace

MannWhitneyResult mann_whitney_u_test(const std::vector<double>& x, const std::vector<double>& y) {
  check_sample(x, "x");
  check_sample(y, "y");
  const size_t n1 = x.size(), n = x.size() + y.size();
  std::vector<double> pooled(x);
  pooled.insert(pooled.end(), y.begin(), y.end());
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return pooled[a] < pooled[b]; });
  // Ranks 1..n in sorted order; each group of equal values gets the mean of its ranks.
  double rank_sum_x = 0.0, tie_term = 0.0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && pooled[order[j + 1]] == pooled[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) {
      if (order[k] < n1) rank_sum_x += mean_rank;
    }
    const double t = static_cast<double>(j - i + 1);
    tie_term += t * t * t - t;
    i = j + 1;
  }
  const double dn1 = static_cast<double>(n1), dn2 = static_cast<double>(y.size());
  return from_u(rank_sum_x - dn1 * (dn1 + 1.0) / 2.0, dn1, dn2, tie_term);
}

double min_p_value(size_t n1, size_t n2) {
  if (n1 == 0 || n2 == 0) {
    throw std::invalid_argument("min_p_value: sample sizes must be >= 1");
  }
  const double a = static_cast<double>(n1), b = static_cast<double>(n2);
  return from_u(a * b, a, b, /*tie_term=*/0.0).p_value;
}

}  // namespace mtp::perf
