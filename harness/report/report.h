// File: harness/report/report.h
//
// Evaluates a scenario's expectations on the records its variants wrote, and renders the
// verdict: a terminal table (one row per compared pair), a JSON report (report.json), JUnit XML
// for CI (one test case per expectation pair) and a self-contained HTML page with inline SVG
// (loss curves, the expectation matrix, per failing pair a heatmap of tensors × steps).
//
// Example:
//   std::vector<ExpectationResult> results;
//   for (const auto& e : sc.expectations) results.push_back(evaluate(e, record_paths));
//   std::cout << format_table(results);
//   write_file_atomically("report.html", to_html(sc, runs, results));
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/compare/compare.h"
#include "harness/scenario/scenario.h"

namespace mtp::report {

/// The version of report.json's layout (key "schema_version"); raised when a key changes
/// meaning or goes away.
inline constexpr int kReportSchemaVersion = 2;

/// Where a parameter's recorded copy lives: the stage that owns it (its first stage) and that
/// stage's (pipeline rank, virtual stage). stage −1: unknown (a batch or loss tensor, or a record
/// without the root attributes param_stages / stage_coords).
struct StageOwner {
  int stage = -1;
  int pipeline_rank = -1;
  int virtual_stage = -1;
  /// "stage 3 (pipeline rank 3, virtual stage 0)", or "" when unknown.
  std::string describe() const;
};

/// The owner of tensor `name` (a global parameter name) in the record `r` (root attributes
/// param_stages and stage_coords, written by engine/step_recorder). Unknown owners are returned
/// as StageOwner{}; a malformed attribute throws RecordError naming the record.
StageOwner owner_of(const record::RecordReader& r, const std::string& name);

/// One comparison of an expectation: variants[0] (baseline) against one other variant.
struct PairResult {
  std::string baseline, other;
  compare::CompareResult result;
  bool holds = false;
  std::string note;  ///< why it does not hold, beyond the comparison (e.g. wrong first divergence)
  double seconds = 0.0;  ///< wall time of the comparison
  /// Owner (in the baseline's record) of every tensor of result.tensors that failed or differs
  /// in bits, by tensor name.
  std::map<std::string, StageOwner> owners;
  /// Non-empty: a record of the pair holds a non-finite value and the expectation does not allow
  /// it ("cand_p4v2: step 1 loss/total[] = nan …"); the pair does not hold, whatever its bits.
  std::string nonfinite;
  /// The comparison could not decide (digests differ where the class needs values); the pair
  /// neither holds nor fails.
  bool undecided = false;
  /// Why the pair is undecided when the comparison itself did not say (an oracle pair whose
  /// record holds only digests); pair_verdict prints it.
  std::string undecided_reason;
  /// What was measured when the pair is not a record comparison (class faster: the simulated
  /// steps); pair_verdict prints it instead of the comparison's verdict.
  std::string verdict;
};

struct ExpectationResult {
  const scenario::Expectation* expectation = nullptr;
  std::vector<PairResult> pairs;  ///< empty when skipped for missing variants
  bool holds = false;
  /// Not evaluated: some of its variants were not run (check --variant; `missing` names them),
  /// or no pair failed and some pair is undecided (`undecided`; the pairs are kept).
  bool skipped = false;
  std::vector<std::string> missing;
  bool undecided = false;
  /// Why it was skipped, in words ("variant(s) x not run", "undecided: …").
  std::string skip_reason() const;
};

/// What a pair's comparison measured, in one line, for every rendering (terminal table, JSON,
/// JUnit, HTML): the non-finite value that fails it, else compare::verdict_text (with the owning
/// stage of the first divergence when known), then the note.
std::string pair_verdict(const PairResult& p);

/// Compares the records of `e.variants` (paths by variant name) under the expectation's class and
/// selection. For class differ with first_divergence set, a pair holds only when the records
/// differ and the first divergence is a matching "<group>/<name>" (at first_divergence_step when
/// non-zero). A pair whose either record holds a non-finite value (record::first_nonfinite)
/// does not hold unless the expectation has allow_nonfinite. A pair the comparison cannot decide
/// (compare::CompareResult::undecided) is undecided, and the expectation is skipped when no pair
/// fails. Throws RecordError when a record cannot be read.
ExpectationResult evaluate(const scenario::Expectation& e,
                           const std::map<std::string, std::string>& record_paths);

/// For a detector (e.detects): turns the relation's verdict into the detection's. The fault is
/// caught when some pair fails (not undecided); the earliest failure (lowest step, then pair
/// order) must be at e.first_divergence ("<group>/<name>" glob) and e.first_divergence_step
/// when given. Then every pair holds, each failing one noted "caught: …"; otherwise none does,
/// with a note saying that the fault went unseen or was seen elsewhere. Skipped results are left.
void apply_detection(const scenario::Expectation& e, ExpectationResult& r);

/// The result for an expectation whose variants `missing` were not run: skipped, holds = false.
ExpectationResult skipped(const scenario::Expectation& e, std::vector<std::string> missing);

/// One step's losses as recorded (/steps/N/loss: lm, mtp_1..mtp_D, total), as float64.
struct StepLoss {
  int step = 0;
  double lm = 0.0;
  std::vector<double> mtp;  ///< mtp_1 … mtp_D
  double total = 0.0;
};

/// Every step's losses of record `r`, steps ascending (steps without a loss group skipped).
/// Throws RecordError when a loss tensor cannot be read.
std::vector<StepLoss> read_losses(const record::RecordReader& r);

/// Facts about one variant run, for the report.
struct VariantRun {
  std::string name, implementation, layout, schedule, record_path;
  int pipeline_size = 1, virtual_size = 1, data_parallel_size = 1;
  int context_parallel_size = 1;  ///< CP (model/context_parallel.h)
  int expert_parallel_size = 1;   ///< EP (model/expert_parallel.h)
  std::string optimizer;
  bool mtp_standalone = false;
  double wall_seconds = 0.0;
  double final_total_loss = 0.0;
  int64_t record_bytes = 0;
  std::string record_mode;       ///< "full" | "digest" | "auto"
  std::vector<StepLoss> losses;  ///< read back from the record
  std::string retrain_command;   ///< the `mtp-harness run …` that re-trains this variant
};

/// The expectation table: expectation, class, verdict (PASS, FAIL, SKIP), compared pairs, first
/// divergence (with its owning stage).
std::string format_table(const std::vector<ExpectationResult>& results);

/// JSON report (schema_version kReportSchemaVersion): scenario, variants run (with their losses
/// and re-train commands), every expectation with its status ("pass", "fail", "skipped") and
/// every pair's full comparison (compare::to_json) and owners, and the overall verdict.
nlohmann::json to_json(const scenario::Scenario& sc, const std::vector<VariantRun>& runs,
                       const std::vector<ExpectationResult>& results);

/// JUnit XML: one <testsuite> for the scenario, one <testcase> per expectation pair (name
/// "<expectation>/<baseline>_vs_<other>", its comparison time), <failure> with the first
/// divergence and the comparison report, <skipped> for expectations not evaluated.
std::string to_junit(const scenario::Scenario& sc, const std::vector<ExpectationResult>& results);

/// JUnit XML for a check that could not run (bad input, a failure before any expectation): one
/// <testcase> named `suite` holding an <error> with `message`.
std::string junit_error(const std::string& suite, const std::string& message);

/// One self-contained HTML page (no external resources; inline SVG and CSS): the scenario and
/// its variants, loss curves per variant and MTP depth, the expectation matrix (expectations ×
/// pairs: pass, fail, skipped), and for every failing pair a heatmap of tensors × steps coloured
/// by the max ULP distance (digest mismatch where only digests are recorded), the first
/// divergence marked and its owning (pipeline rank, virtual stage) named.
std::string to_html(const scenario::Scenario& sc, const std::vector<VariantRun>& runs,
                    const std::vector<ExpectationResult>& results);

}  // namespace mtp::report
