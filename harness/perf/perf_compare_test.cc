// compare_perf: the verdict rule (significant AND beyond the threshold), report.py's
// minimum-repetitions rule, failed, missing and new benchmarks, and the table and JSON.
#include "harness/perf/perf_compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "harness/common/error.h"
#include "harness/perf/mann_whitney.h"

namespace mtp::perf {
namespace {

using ::testing::HasSubstr;

BenchmarkFile file(const std::string& path, std::vector<BenchmarkSeries> series) {
  BenchmarkFile f;
  f.path = path;
  f.benchmarks = std::move(series);
  return f;
}

const std::vector<double> kBase{100, 101, 99, 98, 102};  // median 100, no ties

/// The single row of comparing kBase with `contender` under the default options.
PerfRow one_row(const std::vector<double>& base, const std::vector<double>& contender) {
  const PerfComparison c = compare_perf(file("b.json", {{"BM_X", base, ""}}),
                                        file("c.json", {{"BM_X", contender, ""}}), {});
  EXPECT_EQ(c.rows.size(), 1u);
  return c.rows.at(0);
}

TEST(PerfCompareTest, SignificantAndBeyondThresholdIsARegression) {
  const PerfRow r = one_row(kBase, {120, 119, 121, 122, 118});  // median 120: +20 %
  EXPECT_EQ(r.verdict, Verdict::kRegression);
  EXPECT_DOUBLE_EQ(r.change, 0.2);
  EXPECT_EQ(r.baseline_median_ns, 100.0);
  EXPECT_EQ(r.contender_median_ns, 120.0);
  ASSERT_TRUE(r.p_value.has_value());
  EXPECT_EQ(*r.p_value, min_p_value(5, 5));  // fully separated: 0.0122
  EXPECT_EQ(r.baseline_repetitions, 5u);
}

// A real but small slowdown is said as such, not "unchanged", and does not fail.
TEST(PerfCompareTest, SignificantButWithinThresholdIsSlowerWithinTheThreshold) {
  const PerfRow r = one_row(kBase, {103, 103.5, 104, 103.2, 103.8});  // +3.5 %, separated
  EXPECT_LT(*r.p_value, 0.05);
  EXPECT_DOUBLE_EQ(r.change, 0.035);
  EXPECT_EQ(r.verdict, Verdict::kSlowerWithin);
  EXPECT_STREQ(verdict_name(r.verdict), "slower-within-threshold");
  EXPECT_EQ(r.note, "");
  EXPECT_EQ(one_row(kBase, {97, 96.5, 96, 96.8, 96.2}).verdict, Verdict::kFasterWithin);
}

// The regressions are named after the footer, and the JSON says its layout's version.
TEST(PerfCompareTest, RegressionsAreListedByNameLastAndTheJsonHasAVersion) {
  const PerfComparison c = compare_perf(
      file("b.json", {{"BM_A", kBase, ""}, {"BM_B", kBase, ""}}),
      file("c.json", {{"BM_A", {120, 121, 119, 122, 118}, ""}, {"BM_B", kBase, ""}}), {});
  const std::string table = format_perf_table(c);
  EXPECT_THAT(table, ::testing::EndsWith("REGRESSED\n# REGRESSION: BM_A (+20.0 %)\n"));
  EXPECT_EQ(perf_comparison_json(c)["schema_version"], kPerfComparisonSchemaVersion);
}

TEST(PerfCompareTest, BeyondThresholdButNotSignificantIsUnchanged) {
  // Medians 150 → 180 (+20 %), but the samples overlap: U1 = 13 of 25 (μ = 12.5).
  const PerfRow r = one_row({100, 200, 100, 200, 150}, {180, 90, 210, 100, 190});
  EXPECT_DOUBLE_EQ(r.change, 0.2);
  EXPECT_GT(*r.p_value, 0.05);
  EXPECT_EQ(r.verdict, Verdict::kUnchanged);
  EXPECT_EQ(r.note, "beyond the threshold but not significant");
}

TEST(PerfCompareTest, FasterIsAnImprovement) {
  const PerfRow r = one_row(kBase, {80, 81, 79, 80, 82});
  EXPECT_EQ(r.verdict, Verdict::kImprovement);
  EXPECT_DOUBLE_EQ(r.change, -0.2);
}

TEST(PerfCompareTest, ThreeRepetitionsCannotFlagAndSayWhy) {
  const PerfComparison c = compare_perf(file("b.json", {{"BM_X", {100, 101, 99}, ""}}),
                                        file("c.json", {{"BM_X", {150, 151, 149}, ""}}), {});
  EXPECT_EQ(c.rows[0].verdict, Verdict::kUnchanged);  // p = 0.081 at best
  EXPECT_NEAR(*c.rows[0].p_value, 0.0808555983700523, 1e-12);
  EXPECT_FALSE(c.regressed());
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0], HasSubstr("with 3 vs 3 repetitions the smallest attainable "
                                       "p-value is 0.0809"));
}

TEST(PerfCompareTest, OneRepetitionHasNoUTest) {
  const PerfRow r = one_row({100}, {200, 201});
  EXPECT_EQ(r.verdict, Verdict::kTooFewRepetitions);
  EXPECT_FALSE(r.p_value.has_value());
  EXPECT_DOUBLE_EQ(r.change, 1.005);
  EXPECT_THAT(r.note, HasSubstr("1 vs 2 repetitions"));
}

TEST(PerfCompareTest, FailedMissingNewAndNotRun) {
  const PerfComparison c = compare_perf(file("b.json", {{"BM_Fails", kBase, ""},
                                                        {"BM_Gone", kBase, ""},
                                                        {"BM_NoBase", {}, "no CUDA device"},
                                                        {"BM_Ok", kBase, ""}}),
                                        file("c.json", {{"BM_New", {5, 6}, ""},
                                                        {"BM_Ok", kBase, ""},
                                                        {"BM_Fails", {}, "out of memory"},
                                                        {"BM_NoBase", {}, "no CUDA device"}}),
                                        {});
  ASSERT_EQ(c.rows.size(), 5u);
  EXPECT_EQ(c.rows[0].name, "BM_Fails");
  EXPECT_EQ(c.rows[0].verdict, Verdict::kFailed);
  EXPECT_EQ(c.rows[0].note, "contender skipped: out of memory");
  EXPECT_EQ(c.rows[1].verdict, Verdict::kMissing);
  EXPECT_TRUE(std::isnan(c.rows[1].contender_median_ns));
  EXPECT_EQ(c.rows[2].verdict, Verdict::kNotRun);
  EXPECT_EQ(c.rows[3].verdict, Verdict::kUnchanged);
  EXPECT_EQ(*c.rows[3].p_value, 1.0);  // identical samples
  EXPECT_EQ(c.rows[4].name, "BM_New");
  EXPECT_EQ(c.rows[4].verdict, Verdict::kNew);
  EXPECT_EQ(c.rows[4].contender_median_ns, 5.5);
  EXPECT_TRUE(c.regressed());  // the failed contender run
  EXPECT_EQ(c.count(Verdict::kFailed), 1u);
}

TEST(PerfCompareTest, ChangeFromAZeroBaselineIsRelativeToTheMean) {
  // report.py calculate_change: (new − old) / ((old + new) / 2) when old is 0.
  EXPECT_DOUBLE_EQ(one_row({0, 0}, {2, 2}).change, 2.0);
  EXPECT_EQ(one_row({0, 0}, {0, 0}).change, 0.0);
}

TEST(PerfCompareTest, RejectsBadOptions) {
  const BenchmarkFile f = file("b.json", {{"BM_X", kBase, ""}});
  EXPECT_THROW(compare_perf(f, f, {-0.1, 0.05}), InputError);
  EXPECT_THROW(compare_perf(f, f, {NAN, 0.05}), InputError);
  EXPECT_THROW(compare_perf(f, f, {0.05, 0.0}), InputError);
  EXPECT_THROW(compare_perf(f, f, {0.05, 1.0}), InputError);
  EXPECT_NO_THROW(compare_perf(f, f, {0.0, 0.01}));
}

TEST(PerfCompareTest, TableAndJson) {
  const PerfComparison c = compare_perf(
      file("base.json", {{"BM_Slow/cuda/manual_time", {1.0e6, 1.01e6, 0.99e6, 0.98e6, 1.02e6}, ""},
                         {"BM_Gone", kBase, ""}}),
      file("new.json", {{"BM_Slow/cuda/manual_time", {1.2e6, 1.19e6, 1.21e6, 1.22e6, 1.18e6}, ""}}),
      {0.05, 0.05});
  const std::string table = format_perf_table(c);
  EXPECT_THAT(table, HasSubstr("# perf compare: baseline base.json vs contender new.json"));
  EXPECT_THAT(table, HasSubstr("slower by more than 5.0 %"));
  EXPECT_THAT(table, HasSubstr("BM_Slow/cuda/manual_time"));
  EXPECT_THAT(table, HasSubstr("1 ms"));
  EXPECT_THAT(table, HasSubstr("1.2 ms"));
  EXPECT_THAT(table, HasSubstr("+20.0 %"));
  EXPECT_THAT(table, HasSubstr("0.0122"));
  EXPECT_THAT(table, HasSubstr("5/5"));
  EXPECT_THAT(table, HasSubstr("REGRESSION"));
  EXPECT_THAT(table, HasSubstr("missing (not in the contender)"));
  EXPECT_THAT(table, HasSubstr("# 2 benchmarks: 1 REGRESSION, 0 FAILED"));
  EXPECT_THAT(table, HasSubstr("REGRESSED"));
  const nlohmann::json j = perf_comparison_json(c);
  EXPECT_EQ(j["regressed"], true);
  EXPECT_EQ(j["rows"][0]["verdict"], "REGRESSION");
  EXPECT_DOUBLE_EQ(j["rows"][0]["baseline_median_ns"].get<double>(), 1.0e6);
  EXPECT_TRUE(j["rows"][1]["contender_median_ns"].is_null());
  EXPECT_TRUE(j["rows"][1]["p_value"].is_null());
  EXPECT_EQ(j["threshold"], 0.05);
}

}  // namespace
}  // namespace mtp::perf
