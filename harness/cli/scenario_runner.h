// File: harness/cli/scenario_runner.h
//
// What check, equiv and golden share: plan every variant of a scenario before anything trains
// (errors at the variant's position), refuse absurd runs, choose and guard the run directory,
// train the variants (with a progress line), and evaluate the expectations.
//
// Example:
//   RunSettings s; s.out_dir = run_directory(sc, "");
//   std::vector<engine::RunPlan> plans = plan_variants(sc, {});
//   ScenarioRun run = train_variants(sc, plans, s);
//   std::vector<report::ExpectationResult> results = evaluate_expectations(sc, run);
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/common/output_file.h"
#include "harness/engine/plan.h"
#include "harness/report/report.h"
#include "harness/scenario/scenario.h"

namespace mtp::cli {

/// An error about variant `name` of `sc`: "<file:line:col>: variant "<name>": <what>", the name
/// left out when `what` already starts with it (the planner's messages do).
InputError variant_error(const scenario::Scenario& sc, const std::string& name,
                         const std::string& what);

/// The plans of the scenario's variants in scenario order (only those in `wanted` when it is
/// not empty; an unknown name is an error). Throws InputError prefixed with the variant's
/// position when a variant cannot be planned.
std::vector<engine::RunPlan> plan_variants(const scenario::Scenario& sc,
                                           const std::set<std::string>& wanted);

/// The directory a check writes to: `out` when given (created; refused, with exit 2, when it
/// holds records made from another scenario text, so runs of different scenarios never mix),
/// else a new runs/<scenario>/<UTC time> (runs/<scenario>/latest then links to it).
std::string run_directory(const scenario::Scenario& sc, const std::string& out,
                          const std::string& flag = "--out");

/// Removes the oldest run directories of runs/<scenario>/ (names of run_directory's UTC form)
/// until `keep` remain, never `current` (check --keep-last N). Returns how many it removed.
int prune_run_directories(const scenario::Scenario& sc, int keep, const std::string& current);

/// How variants are trained.
struct RunSettings {
  std::string out_dir;      ///< records go to <out_dir>/<variant>.h5
  uint64_t max_memory = 0;  ///< --max-memory; 0 = what the device has
  bool verbose = false;     ///< print each variant's estimate and chunk map
  bool progress = false;    ///< a progress line on stderr (a terminal, not --quiet)
  /// After step 1, say on stderr how long the rest of a variant will take when that is over a
  /// minute (not --quiet).
  bool announce_long_runs = true;
  bool print_rows = true;  ///< the variant table on stdout
  /// Flags that reproduce the run when appended to `mtp-harness run` (device, init, record).
  std::string retrain_flags;
};

/// What training the variants produced.
struct ScenarioRun {
  std::map<std::string, std::string> records;  ///< variant → record path
  std::vector<report::VariantRun> runs;        ///< in training order
};

/// "" when the record at `path` was made from `sc`'s text (its attribute scenario_text), else why
/// not ("it was made from another scenario text (scenario \"x\")", "it holds no scenario
/// text …", "it is not a readable record (…)").
std::string record_scenario_mismatch(const std::string& path, const scenario::Scenario& sc);

/// Checks memory and disk for every plan (InputError with the estimate), prints the variant
/// table header, trains each plan in order and reads back its losses. Throws what run_variant
/// throws, InputError prefixed with the variant's position.
ScenarioRun train_variants(const scenario::Scenario& sc, const std::vector<engine::RunPlan>& plans,
                           const RunSettings& settings);

/// Every expectation evaluated on the records of `run`, or skipped when a variant it compares
/// was not run.
std::vector<report::ExpectationResult> evaluate_expectations(const scenario::Scenario& sc,
                                                             const ScenarioRun& run);

/// The `mtp-harness run …` command that re-trains `variant` of `sc` into `record`.
std::string retrain_command(const scenario::Scenario& sc, const std::string& variant,
                            const std::string& record, const std::string& extra_flags);

/// Registers every file the scenario reads as an input of `files`: the scenario file (not the
/// embedded default), its corpus ([data] path, or PREFIX.idx and PREFIX.bin) and the records of
/// [training] init_from / resume_from, so no output of the command can overwrite them.
void add_scenario_inputs(FileRoles& files, const scenario::Scenario& sc);

/// Whether standard error is a terminal (progress lines go there only then).
bool stderr_is_terminal();

}  // namespace mtp::cli
