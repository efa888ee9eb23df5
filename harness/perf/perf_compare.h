// File: harness/perf/perf_compare.h
//
// Compares a contender's benchmark results with a baseline's, as google/benchmark's
// tools/compare.py does with its U test, turned into a CI verdict: benchmarks are matched by
// name; per benchmark the repetitions' real times are compared with the two-sided Mann–Whitney
// U test (mann_whitney.h; skipped, as in tools/gbench/report.py, when a side has fewer than 2
// repetitions), and a benchmark regressed only when the test is significant (p < alpha) AND its
// median real time is slower than the baseline's by more than `threshold` (a fraction). Both
// conditions: a significant 1 % change is not worth failing CI for, and a 20 % change within
// the noise of 3 repetitions is not evidence. Torch-free.
//
// Example:
//   const PerfComparison c = compare_perf(read_benchmark_json(base), read_benchmark_json(cont),
//                                         PerfCompareOptions{});
//   std::cout << format_perf_table(c);
//   return c.regressed() ? 1 : 0;
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/perf/benchmark_json.h"

namespace mtp::perf {

/// PerfCompareOptions: when a difference counts as a regression.
struct PerfCompareOptions {
  /// The median real time must be slower than the baseline's by more than this fraction.
  /// Default: 0.05 (5 %). Must be finite and >= 0.
  double threshold = 0.05;
  /// Significance level of the two-sided U test. Default: 0.05 (compare.py's --alpha).
  /// Must be in (0, 1).
  double alpha = 0.05;
};

/// Verdict: what happened to one benchmark.
enum class Verdict {
  kRegression,         ///< p < alpha and the median slower by more than the threshold
  kImprovement,        ///< p < alpha and the median faster by more than the threshold
  kSlowerWithin,       ///< p < alpha and the median slower, but by at most the threshold
  kFasterWithin,       ///< p < alpha and the median faster, but by at most the threshold
  kUnchanged,          ///< not significant
  kTooFewRepetitions,  ///< fewer than 2 repetitions on a side: no U test (report.py's rule)
  kFailed,             ///< the contender's run was skipped with an error, the baseline's ran
  kNotRun,             ///< the baseline's run was skipped (with or without the contender's)
  kMissing,            ///< in the baseline only
  kNew,                ///< in the contender only
};

/// verdict_name: "REGRESSION", "improved", "slower-within-threshold",
/// "faster-within-threshold", "unchanged", "few-reps", "FAILED", "not-run", "missing", "new"
/// (failing verdicts in capitals).
const char* verdict_name(Verdict v);

/// PerfRow: one benchmark's comparison.
struct PerfRow {
  std::string name;
  Verdict verdict = Verdict::kUnchanged;
  size_t baseline_repetitions = 0;
  size_t contender_repetitions = 0;
  double baseline_median_ns = 0.0;   ///< NaN when the baseline has no repetition
  double contender_median_ns = 0.0;  ///< NaN when the contender has no repetition
  /// (contender − baseline) / baseline of the medians (tools/gbench/report.py
  /// calculate_change: 0 when both are 0, relative to their mean when the baseline is 0); NaN
  /// when either median is missing.
  double change = 0.0;
  std::optional<double> p_value;  ///< the U test's, when both sides have >= 2 repetitions
  std::string note;               ///< why a row failed or was not tested
};

/// PerfComparison: every row (baseline order, then benchmarks new in the contender) and the
/// warnings that apply to the whole comparison.
struct PerfComparison {
  std::string baseline_path, contender_path;
  PerfCompareOptions options;
  std::vector<PerfRow> rows;
  std::vector<std::string> warnings;
  /// Whether a row is kRegression or kFailed (the exit-1 condition).
  bool regressed() const;
  /// How many rows have verdict `v`.
  size_t count(Verdict v) const;
};

/// kMinRepetitions: below this many repetitions on either side the U test is not run
/// (google/benchmark tools/gbench/report.py UTEST_MIN_REPETITIONS).
inline constexpr size_t kMinRepetitions = 2;

/// check_options: throws InputError naming the flag when threshold or alpha is out of range.
void check_options(const PerfCompareOptions& options);

/// compare_perf: the comparison of `contender` with `baseline` (see the file comment). Adds a
/// warning when, for some row, even fully separated samples of its repetition counts cannot
/// reach p < alpha (min_p_value), so that no regression could be flagged there. Does not look
/// at the files' fingerprints (fingerprint_mismatches). Throws InputError for bad options.
PerfComparison compare_perf(const BenchmarkFile& baseline, const BenchmarkFile& contender,
                            const PerfCompareOptions& options);

/// format_perf_table: the comparison as text: '#' header lines (files, rule), one row per
/// benchmark (name, baseline median, contender median, change %, p-value, repetitions,
/// verdict), warnings, a '#' footer counting the verdicts, and the regressed and failed
/// benchmarks by name last (what a reader of a long table needs).
std::string format_perf_table(const PerfComparison& c);

/// Version of perf_comparison_json's layout (key "schema_version").
inline constexpr int kPerfComparisonSchemaVersion = 2;

/// perf_comparison_json: the comparison as JSON: {schema_version, baseline, contender, threshold,
/// alpha, regressed, warnings, rows: [{name, verdict, baseline_median_ns, contender_median_ns,
/// change, p_value, baseline_repetitions, contender_repetitions, note}]}; NaN and a missing
/// p-value are null.
nlohmann::json perf_comparison_json(const PerfComparison& c);

}  // namespace mtp::perf
