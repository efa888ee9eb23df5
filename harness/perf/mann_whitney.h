// File: harness/perf/mann_whitney.h
//
// The two-sided Mann–Whitney U test (Wilcoxon rank-sum test) that google/benchmark's
// tools/compare.py runs on the repetitions of two benchmark runs (tools/gbench/report.py,
// calc_utest: scipy.stats.mannwhitneyu(x, y, alternative="two-sided")), with the p-value from
// the normal approximation with tie correction and continuity correction, as scipy computes it
// with method="asymptotic", use_continuity=True (scipy/stats/_mannwhitneyu.py, _get_mwu_z):
//
//   U1 = R1 − n1(n1 + 1)/2   (R1: the sum of x's ranks in the pooled sample, ties averaged)
//   U2 = n1·n2 − U1,  U = max(U1, U2),  μ = n1·n2/2
//   σ  = sqrt(n1·n2/12 · ((n + 1) − Σ(t³ − t) / (n(n − 1))))   (t: size of each group of ties)
//   z  = (U − μ − ½) / σ,  p = min(1, 2·(1 − Φ(z)))
//
// For small samples without ties scipy >= 1.7 ("auto") uses the exact distribution instead, so
// compare.py may print a smaller p there (5 vs 5 fully separated: exact 0.0079, asymptotic
// 0.0122). Torch-free.
//
// Example:
//   const MannWhitneyResult r = mann_whitney_u_test(baseline_times, contender_times);
//   if (r.p_value < 0.05) { ... the two distributions differ ... }
#pragma once

#include <cstddef>
#include <vector>

namespace mtp::perf {

/// MannWhitneyResult: the statistic and the two-sided p-value of mann_whitney_u_test.
struct MannWhitneyResult {
  double u1 = 0.0;  ///< U of x: pairs (x_i, y_j) with x_i > y_j, a tie counting ½
  double u2 = 0.0;  ///< U of y: n1·n2 − u1
  double z = 0.0;  ///< (max(u1, u2) − n1·n2/2 − ½) / σ; −∞ when every value is equal (σ = 0)
  double p_value = 1.0;  ///< two-sided, in [0, 1]; 1 when every value is equal
};

/// mann_whitney_u_test: the two-sided test of x against y (see the file comment). Symmetric:
/// swapping x and y swaps u1 and u2 and keeps z and p. Throws std::invalid_argument when x or y
/// is empty or holds a NaN.
MannWhitneyResult mann_whitney_u_test(const std::vector<double>& x, const std::vector<double>& y);

/// min_p_value: the smallest p-value mann_whitney_u_test can give for samples of sizes n1 and
/// n2 (no ties, every x above every y). When it is not below alpha, no difference between such
/// samples can be significant at alpha (3 vs 3: 0.081; 4 vs 4: 0.030; 5 vs 5: 0.012). Throws
/// std::invalid_argument when n1 or n2 is 0.
double min_p_value(size_t n1, size_t n2);

}  // namespace mtp::perf
