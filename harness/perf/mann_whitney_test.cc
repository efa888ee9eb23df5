// mann_whitney_u_test against values computed independently: hand-derived small cases, and the
// p-values scipy 1.6 (normal approximation with tie and continuity correction, the method
// implemented here) gave for google/benchmark's own U-test fixtures.
#include "harness/perf/mann_whitney.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace mtp::perf {
namespace {

// Relative tolerance for p-values: the constants come from other erfc implementations (scipy,
// glibc), which agree to ~1e-15.
constexpr double kRel = 1e-12;

TEST(MannWhitneyTest, FullySeparatedSamplesByHand) {
  // x = {1, 2, 3} below y = {4, 5, 6}: x's ranks 1 + 2 + 3 = 6, U1 = 6 − 3·4/2 = 0, U2 = 9.
  // μ = 4.5, σ = sqrt(3·3·7/12) = sqrt(5.25), z = (9 − 4.5 − 0.5)/sqrt(5.25) = 1.7457431218879391,
  // p = erfc(z/√2) = 0.0808555983700523.
  const MannWhitneyResult r = mann_whitney_u_test({1, 2, 3}, {4, 5, 6});
  EXPECT_EQ(r.u1, 0.0);
  EXPECT_EQ(r.u2, 9.0);
  EXPECT_NEAR(r.z, 4.0 / std::sqrt(5.25), 1e-15);
  EXPECT_NEAR(r.p_value, 0.0808555983700523, kRel * 0.0808555983700523);
}

TEST(MannWhitneyTest, TiesByHand) {
  // x = {1, 2, 2, 3, 5}, y = {2, 3, 3, 4, 6, 7}. Pooled ranks: 1 → 1; 2, 2, 2 → 3; 3, 3, 3 → 6;
  // 4 → 8; 5 → 9; 6 → 10; 7 → 11. R1 = 1 + 3 + 3 + 6 + 9 = 22, U1 = 22 − 15 = 7, U2 = 23.
  // Ties: two groups of 3, Σ(t³ − t) = 48. σ² = 30/12 · (12 − 48/110) = 28.909090...,
  // z = (23 − 15 − 0.5)/σ = 1.3949031210020042, p = 0.16304505585423731.
  const MannWhitneyResult r = mann_whitney_u_test({1, 2, 2, 3, 5}, {2, 3, 3, 4, 6, 7});
  EXPECT_EQ(r.u1, 7.0);
  EXPECT_EQ(r.u2, 23.0);
  EXPECT_NEAR(r.z, 7.5 / std::sqrt(2.5 * (12.0 - 48.0 / 110.0)), 1e-15);
  EXPECT_NEAR(r.p_value, 0.16304505585423731, kRel * 0.16304505585423731);
}

// google/benchmark tools/gbench/Inputs/test3_run0.json vs test3_run1.json, benchmark "short"
// (repetitions 2 vs 3). The p-values are scipy 1.6's, which report.py's tests expected before
// commit 67b77da3 ("report.py: adjust expected u-test values for tests", 2021-09-03) switched
// them to scipy 1.7's exact method: time_pvalue 0.7670968684102772, cpu_pvalue
// 0.14891467317876572.
TEST(MannWhitneyTest, GoogleBenchmarkFixturesScipy16) {
  const MannWhitneyResult real = mann_whitney_u_test({8, 8}, {7, 4.54, 800});
  EXPECT_EQ(real.u1, 4.0);  // each 8 is above 7 and 4.54, below 800 (the tie is inside x)
  EXPECT_NEAR(real.p_value, 0.7670968684102772, kRel * 0.7670968684102772);
  const MannWhitneyResult cpu = mann_whitney_u_test({80, 77}, {75, 66.6, 1});
  EXPECT_EQ(cpu.u1, 6.0);  // every x above every y
  EXPECT_NEAR(cpu.p_value, 0.14891467317876572, kRel * 0.14891467317876572);
}

TEST(MannWhitneyTest, StatisticAtItsMeanGivesOne) {
  // BM_Two of the same fixtures: {9, 8} vs {10, 7}, U1 = U2 = μ = 2, z = −0.5/σ < 0. scipy 1.6
  // doubled the survival function of |z| (0.6985353583033387, the old report.py constant);
  // scipy >= 1.7 (method "asymptotic") doubles sf(z) and clips to 1, as done here.
  const MannWhitneyResult r = mann_whitney_u_test({9, 8}, {10, 7});
  EXPECT_EQ(r.u1, 2.0);
  EXPECT_EQ(r.u2, 2.0);
  EXPECT_LT(r.z, 0.0);
  EXPECT_EQ(r.p_value, 1.0);
}

TEST(MannWhitneyTest, SymmetricInItsArguments) {
  const std::vector<double> a{3.1, 2.7, 3.3, 2.9, 3.0}, b{3.4, 3.6, 3.2, 3.5, 3.8, 3.1};
  const MannWhitneyResult ab = mann_whitney_u_test(a, b), ba = mann_whitney_u_test(b, a);
  EXPECT_EQ(ab.u1, ba.u2);
  EXPECT_EQ(ab.u2, ba.u1);
  EXPECT_EQ(ab.p_value, ba.p_value);
  EXPECT_LT(ab.p_value, 0.05);  // a is clearly below b
}

TEST(MannWhitneyTest, AllValuesEqualGiveOne) {
  const MannWhitneyResult r = mann_whitney_u_test({5, 5, 5}, {5, 5});
  EXPECT_EQ(r.u1, 3.0);  // every pair a tie: 6 pairs × ½
  EXPECT_EQ(r.p_value, 1.0);
  EXPECT_EQ(r.z, -std::numeric_limits<double>::infinity());
}

TEST(MannWhitneyTest, MinimumPValueSetsTheRepetitionsNeeded) {
  // Fully separated samples, by the formula: n vs n, U = n², σ² = n²(2n + 1)/12.
  EXPECT_NEAR(min_p_value(3, 3), 0.0808555983700523, kRel);
  EXPECT_NEAR(min_p_value(4, 4), 0.03038282197657751, kRel);
  EXPECT_NEAR(min_p_value(5, 5), 0.012185780355344818, kRel);
  EXPECT_EQ(min_p_value(5, 5), mann_whitney_u_test({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}).p_value);
  EXPECT_EQ(min_p_value(1, 1), 1.0);  // z = (1 − 0.5 − 0.5)/σ = 0
}

TEST(MannWhitneyTest, RejectsEmptySamplesAndNaN) {
  EXPECT_THROW(mann_whitney_u_test({}, {1.0}), std::invalid_argument);
  EXPECT_THROW(mann_whitney_u_test({1.0}, {}), std::invalid_argument);
  EXPECT_THROW(mann_whitney_u_test({1.0, std::nan("")}, {2.0}), std::invalid_argument);
  EXPECT_THROW(min_p_value(0, 3), std::invalid_argument);
}

}  // namespace
}  // namespace mtp::perf
