#include "harness/perf/perf_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "harness/common/error.h"
#include "harness/perf/mann_whitney.h"

namespace mtp::perf {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/// tools/gbench/report.py calculate_change.
double relative_change(double old_value, double new_value) {
  if (std::isnan(old_value) || std::isnan(new_value)) return kNaN;
  if (old_value == 0.0 && new_value == 0.0) return 0.0;
  if (old_value == 0.0) return (new_value - old_value) / ((old_value + new_value) / 2.0);
  return (new_value - old_value) / std::fabs(old_value);
}

/// Time in the largest unit that keeps the value >= 1, 4 significant digits ("757.3 ms").
std::string format_time(double ns) {
  if (std::isnan(ns)) return "-";
  static const std::pair<double, const char*> kUnits[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "us"}};
  for (const auto& [scale, unit] : kUnits) {
    if (ns >= scale) return fmt::format("{:.4g} {}", ns / scale, unit);
  }
  return fmt::format("{:.4g} ns", ns);
}

/// The row of a benchmark in one file only: kMissing (baseline only) or kNew (contender only).
PerfRow one_sided_row(const BenchmarkSeries& s, bool in_baseline) {
  PerfRow row;
  row.name = s.name;
  row.verdict = in_baseline ? Verdict::kMissing : Verdict::kNew;
  (in_baseline ? row.baseline_repetitions : row.contender_repetitions) = s.real_time_ns.size();
  row.baseline_median_ns = in_baseline ? median(s.real_time_ns) : kNaN;
  row.contender_median_ns = in_baseline ? kNaN : median(s.real_time_ns);
  row.change = kNaN;
  row.note = in_baseline ? "not in the contender" : "not in the baseline";
  return row;
}

/// Compares one benchmark present in both files.
PerfRow compare_series(const BenchmarkSeries& b, const BenchmarkSeries& c,
                       const PerfCompareOptions& opt) {
  PerfRow row;
  row.name = b.name;
  row.baseline_repetitions = b.real_time_ns.size();
  row.contender_repetitions = c.real_time_ns.size();
  row.baseline_median_ns = median(b.real_time_ns);
  row.contender_median_ns = median(c.real_time_ns);
  row.change = relative_change(row.baseline_median_ns, row.contender_median_ns);
  if (b.real_time_ns.empty()) {
    row.verdict = Verdict::kNotRun;
    row.note = "baseline skipped: " + b.error;
    return row;
  }
  if (c.real_time_ns.empty()) {
    row.verdict = Verdict::kFailed;
    row.note = "contender skipped: " + c.error;
    return row;
  }
  if (!c.error.empty()) row.note = "some contender repetitions skipped: " + c.error;
  if (std::min(row.baseline_repetitions, row.contender_repetitions) < kMinRepetitions) {
    row.verdict = Verdict::kTooFewRepetitions;
    row.note = fmt::format("no U test with {} vs {} repetitions (needs >= {} each)",
                           row.baseline_repetitions, row.contender_repetitions, kMinRepetitions);
    return row;
  }
  row.p_value = mann_whitney_u_test(b.real_time_ns, c.real_time_ns).p_value;
  const bool significant = *row.p_value < opt.alpha;
  if (significant && row.change > opt.threshold) {
    row.verdict = Verdict::kRegression;
  } else if (significant && row.change < -opt.threshold) {
    row.verdict = Verdict::kImprovement;
  } else if (significant && row.change > 0.0) {
    row.verdict = Verdict::kSlowerWithin;  // real, but not worth failing CI for
  } else if (significant && row.change < 0.0) {
    row.verdict = Verdict::kFasterWithin;
  } else {
    row.verdict = Verdict::kUnchanged;
    if (std::fabs(row.change) > opt.threshold) {
      row.note = "beyond the threshold but not significant";
    }
  }
  return row;
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kRegression:
      return "REGRESSION";
    case Verdict::kImprovement:
      return "improved";
    case Verdict::kSlowerWithin:
      return "slower-within-threshold";
    case Verdict::kFasterWithin:
      return "faster-within-threshold";
    case Verdict::kUnchanged:
      return "unchanged";
    case Verdict::kTooFewRepetitions:
      return "few-reps";
    case Verdict::kFailed:
      return "FAILED";
    case Verdict::kNotRun:
      return "not-run";
    case Verdict::kMissing:
      return "missing";
    case Verdict::kNew:
      return "new";
  }
  return "?";
}

bool PerfComparison::regressed() const {
  return count(Verdict::kRegression) > 0 || count(Verdict::kFailed) > 0;
}

size_t PerfComparison::count(Verdict v) const {
  return static_cast<size_t>(
      std::count_if(rows.begin(), rows.end(), [v](const PerfRow& r) { return r.verdict == v; }));
}

void check_options(const PerfCompareOptions& options) {
  if (!std::isfinite(options.threshold) || options.threshold < 0.0) {
    throw InputError(fmt::format("--threshold {} must be a finite fraction >= 0 (0.05 = 5 %)",
                                 options.threshold));
  }
  if (!(options.alpha > 0.0 && options.alpha < 1.0)) {
    throw InputError(fmt::format("--alpha {} must be in (0, 1)", options.alpha));
  }
}

PerfComparison compare_perf(const BenchmarkFile& baseline, const BenchmarkFile& contender,
                            const PerfCompareOptions& options) {
  check_options(options);
  PerfComparison out;
  out.baseline_path = baseline.path;
  out.contender_path = contender.path;
  out.options = options;
  std::map<std::string, const BenchmarkSeries*> by_name;
  for (const BenchmarkSeries& s : contender.benchmarks) by_name.emplace(s.name, &s);
  std::set<std::pair<size_t, size_t>> untestable;  // repetition counts that cannot reach alpha
  for (const BenchmarkSeries& b : baseline.benchmarks) {
    const auto it = by_name.find(b.name);
    if (it == by_name.end()) {
      out.rows.push_back(one_sided_row(b, /*in_baseline=*/true));
      continue;
    }
    PerfRow row = compare_series(b, *it->second, options);
    if (row.p_value &&
        min_p_value(row.baseline_repetitions, row.contender_repetitions) >= options.alpha) {
      untestable.emplace(row.baseline_repetitions, row.contender_repetitions);
    }
    out.rows.push_back(row);
    by_name.erase(it);
  }
  for (const BenchmarkSeries& c : contender.benchmarks) {
    if (by_name.count(c.name) != 0) out.rows.push_back(one_sided_row(c, /*in_baseline=*/false));
  }
  for (const auto& [n1, n2] : untestable) {
    out.warnings.push_back(fmt::format(
        "with {} vs {} repetitions the smallest attainable p-value is {:.4f} >= alpha {}: no "
        "regression can be flagged for those rows (use >= 5 repetitions)",
        n1, n2, min_p_value(n1, n2), options.alpha));
  }
  return out;
}

std::string format_perf_table(const PerfComparison& c) {
  size_t width = std::string("benchmark").size();
  for (const PerfRow& r : c.rows) width = std::max(width, r.name.size());
  std::string out;
  out += fmt::format("# perf compare: baseline {} vs contender {}\n", c.baseline_path,
                     c.contender_path);
  out += fmt::format(
      "# regression: two-sided Mann-Whitney U test p < {} and the median real time slower by "
      "more than {:.1f} %\n",
      c.options.alpha, 100.0 * c.options.threshold);
  out += fmt::format("# {:<{}}  {:>11}  {:>11}  {:>9}  {:>7}  {:>7}  {}\n", "benchmark", width,
                     "baseline", "contender", "change", "p-value", "reps", "verdict");
  for (const PerfRow& r : c.rows) {
    const std::string change =
        std::isnan(r.change) ? "-" : fmt::format("{:+.1f} %", 100.0 * r.change);
    const std::string p = r.p_value ? fmt::format("{:.4f}", *r.p_value) : "-";
    const std::string reps = fmt::format("{}/{}", r.baseline_repetitions, r.contender_repetitions);
    out +=
        fmt::format("  {:<{}}  {:>11}  {:>11}  {:>9}  {:>7}  {:>7}  {}{}\n", r.name, width,
                    format_time(r.baseline_median_ns), format_time(r.contender_median_ns), change,
                    p, reps, verdict_name(r.verdict), r.note.empty() ? "" : " (" + r.note + ")");
  }
  for (const std::string& w : c.warnings) out += "# warning: " + w + "\n";
  out += fmt::format(
      "# {} benchmarks: {} REGRESSION, {} FAILED, {} improved, {} slower within the threshold, "
      "{} faster within the threshold, {} unchanged, {} few-reps, {} not-run, {} missing, {} "
      "new; {}\n",
      c.rows.size(), c.count(Verdict::kRegression), c.count(Verdict::kFailed),
      c.count(Verdict::kImprovement), c.count(Verdict::kSlowerWithin),
      c.count(Verdict::kFasterWithin), c.count(Verdict::kUnchanged),
      c.count(Verdict::kTooFewRepetitions), c.count(Verdict::kNotRun), c.count(Verdict::kMissing),
      c.count(Verdict::kNew), c.regressed() ? "REGRESSED" : "no regression");
  for (const PerfRow& r : c.rows) {
    if (r.verdict == Verdict::kRegression || r.verdict == Verdict::kFailed) {
      out += fmt::format("# {}: {}{}\n", verdict_name(r.verdict), r.name,
                         std::isnan(r.change) ? "" : fmt::format(" ({:+.1f} %)", 100.0 * r.change));
    }
  }
  return out;
}

nlohmann::json perf_comparison_json(const PerfComparison& c) {
  auto number = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  nlohmann::json rows = nlohmann::json::array();
  for (const PerfRow& r : c.rows) {
    rows.push_back({{"name", r.name},
                    {"verdict", verdict_name(r.verdict)},
                    {"baseline_median_ns", number(r.baseline_median_ns)},
                    {"contender_median_ns", number(r.contender_median_ns)},
                    {"change", number(r.change)},
                    {"p_value", r.p_value ? nlohmann::json(*r.p_value) : nlohmann::json()},
                    {"baseline_repetitions", r.baseline_repetitions},
                    {"contender_repetitions", r.contender_repetitions},
                    {"note", r.note}});
  }
  return {{"schema_version", kPerfComparisonSchemaVersion},
          {"baseline", c.baseline_path},
          {"contender", c.contender_path},
          {"threshold", c.options.threshold},
          {"alpha", c.options.alpha},
          {"regressed", c.regressed()},
          {"warnings", c.warnings},
          {"rows", rows}};
}

}  // namespace mtp::perf
