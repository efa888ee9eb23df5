// File: harness/report/report.h
//
// Evaluates a scenario's expectations on the records its variants wrote, and renders the
// verdict: a terminal table (one row per expectation), a JSON report and JUnit XML for CI.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/compare/compare.h"
#include "harness/scenario/scenario.h"

namespace mtp::report {

/// One comparison of an expectation: variants[0] (baseline) against one other variant.
struct PairResult {
  std::string baseline, other;
  compare::CompareResult result;
  bool holds = false;
  std::string note;  ///< why it does not hold, beyond the comparison (e.g. wrong first divergence)
};

struct ExpectationResult {
  const scenario::Expectation* expectation = nullptr;
  std::vector<PairResult> pairs;
  bool holds = false;
};

/// Compares the records of `e.variants` (paths by variant name) under the expectation's class and
/// selection. For class differ with first_divergence set, a pair holds only when the records
/// differ and the first divergence is a matching "<group>/<name>" (at first_divergence_step when
/// non-zero). Throws RecordError when a record cannot be read.
ExpectationResult evaluate(const scenario::Expectation& e,
                           const std::map<std::string, std::string>& record_paths);

/// Facts about one variant run, for the report.
struct VariantRun {
  std::string name, implementation, layout, schedule, record_path;
  int pipeline_size = 1, virtual_size = 1, data_parallel_size = 1;
  std::string optimizer;
  bool mtp_standalone = false;
  double wall_seconds = 0.0;
  double final_total_loss = 0.0;
  int64_t record_bytes = 0;
};

/// The expectation table: expectation, class, verdict, compared pairs, first divergence.
std::string format_table(const std::vector<ExpectationResult>& results);

/// JSON report: scenario, variants run, every expectation with every pair's verdict and first
/// divergence, and the overall verdict.
nlohmann::json to_json(const scenario::Scenario& sc, const std::vector<VariantRun>& runs,
                       const std::vector<ExpectationResult>& results);

/// JUnit XML: one <testcase> per expectation, <failure> with the first divergence.
std::string to_junit(const scenario::Scenario& sc, const std::vector<ExpectationResult>& results);

}  // namespace mtp::report
