// File: harness/scenario/scenario.h
//
// Scenarios: one TOML file holds the model, the data, the training settings, the variants to
// run and the expectations to check (schema: scenarios/README.md). Every error names the file,
// the line and column, the key and the rule broken; unknown keys are errors (a typo must not
// silently fall back to a default).
#pragma once

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/compare/compare.h"
#include "harness/config/model_config.h"
#include "harness/config/run_config.h"
#include "harness/data/token_source.h"

namespace mtp::scenario {

/// What an expectation's variants are judged against (its `class`).
enum class Judge {
  kRecords,   ///< variants[1..] against variants[0] under `cls` (bitwise, ulp, tol, rel_l2, differ)
  kOracle,    ///< class "oracle": each variant against the float64 straight-line program
  kReplicas,  ///< class "replicas": each variant's parameter copies against its recorded ones
  kFaster,    ///< class "faster:X": a layout's simulated step against another's (no training)
};

/// Class "faster:X" (issue 23): layouts[1]'s simulated step (harness/sim) is at most X of
/// layouts[0]'s, for the model of `preset` (or the scenario's [model]) with the node costs of
/// `costs` (calibrate's JSON, a path from the working directory), P = `pipeline_size`, M
/// = `num_microbatches`, `schedule` ("" = derived from P and V). Evaluated without training.
struct SimulatedClaim {
  std::vector<std::string> layouts;  ///< [baseline, candidate]
  int pipeline_size = 1;
  int num_microbatches = 1;
  std::string schedule;
  std::string costs;
  std::string preset;           ///< "" = the scenario's [model]
  bool split = false;           ///< layouts read as candidate/split/ reads them
  int cp = 1;                   ///< context-parallel size simulated (sim/simulate.h Parallelism)
  int ep = 1;                   ///< expert-parallel size simulated
  std::string collective_link;  ///< "nvlink" | "ib"; "" = the costs file's link
  double at_most = 1.0;
};

/// A claimed relation between variants: each of variants[1..] compared with variants[0].
struct Expectation {
  std::string name;  ///< unique, [A-Za-z0-9_.-]+
  std::vector<std::string>
      variants;               ///< ≥ 2 variant names (oracle: ≥ 1); the first is the baseline
  compare::CompareClass cls;  ///< bitwise | ulp:N | tol:R,A | rel_l2:B | differ
  /// kOracle: each listed variant (≥ 1) against the float64 straight-line program
  /// (harness/oracle/check/record_check.h), losses and grads of the selected steps (default
  /// step 1), bounds from the variant's dtype; `cls` is unused.
  /// kReplicas: each listed variant (≥ 1, recorded with [training] record_copies) has every
  /// parameter copy (record group "copies": data-parallel replicas, word-embedding copies) bitwise
  /// equal to the recorded copy at every selected step (default all, the start step included);
  /// include/exclude match the parameter's name; `cls` is bitwise
  /// (report/replicas.h).
  Judge judge = Judge::kRecords;
  std::optional<SimulatedClaim> simulated;  ///< kFaster only
  bool oracle() const { return judge == Judge::kOracle; }
  /// "oracle", "replicas", or cls.to_string(): the class as the scenario wrote it.
  std::string class_text() const {
    if (judge == Judge::kFaster) return fmt::format("faster:{:g}", simulated->at_most);
    return judge == Judge::kOracle     ? "oracle"
           : judge == Judge::kReplicas ? "replicas"
                                       : cls.to_string();
  }
  compare::Selection selection;  ///< records (groups), include/exclude, steps
  std::string why;               ///< the reason the relation must hold (printed)
  /// Only with class differ: the first divergence must be a tensor matching this glob
  /// ("grad/embedding.*") at this step (0 = any step). Empty = any first divergence.
  std::string first_divergence;
  int first_divergence_step = 0;
  /// Accept records holding NaN or inf (record::first_nonfinite). Off: a pair whose either
  /// record holds one fails, naming the value, since NaN equals NaN bit for bit.
  bool allow_nonfinite = false;
  /// A detector (scenarios/faults.toml): the expectation must FAIL because of this planted bug,
  /// its earliest failure at first_divergence (a glob on "<group>/<name>") and
  /// first_divergence_step when given. It holds when the fault is caught there.
  std::optional<config::Fault> detects;
};

struct Scenario {
  std::string source;  ///< file path, or "<embedded default>"
  std::string text;    ///< the TOML text it was parsed from (records embed it)
  std::string name;
  std::string description;
  config::ModelConfig model;
  config::TrainingConfig training;
  data::DataConfig data;
  std::vector<config::VariantSpec> variants;
  std::vector<Expectation> expectations;
  /// [scenario] fault_injection: variants may plant a bug (`inject`); off, an `inject` key is
  /// an error at its position.
  bool fault_injection = false;
  /// Where each table and key was written, "<source>:<line>:<column>", by dotted path: "data",
  /// "data.path", "model.hidden_size", "variant.<name>" (its table), "variant.<name>.layout",
  /// "expectation.<name>.include". Filled by parse_scenario.
  std::map<std::string, std::string> positions;
  /// The variant called `name`; throws InputError naming the scenario when absent.
  const config::VariantSpec& variant(const std::string& name) const;
  /// "<source>:<line>:<column>" of `key` (a dotted path as in `positions`), else of the closest
  /// enclosing table that was written ("variant.<name>" for "variant.<name>.layout"), else
  /// "<source>". Errors found after parsing start with it.
  std::string position(const std::string& key) const;
  /// position("variant.<name>"): the prefix of errors found when the variant is planned or run.
  std::string variant_location(const std::string& name) const;
};

/// Parses a step selection: "all" (→ empty set = every step), "A", "A-B", "A-" (A to
/// max_step) or comma-separated parts of those. Throws InputError quoting the spec.
std::set<int> parse_step_spec(const std::string& spec, int max_step);

/// Parses scenario text; `source` names it in errors. Also opens the corpus [data] names and
/// checks it against the model (it exists, is a readable regular file, holds a sequence, fits
/// the vocabulary), so a data mistake is reported at its key before anything runs. Throws
/// InputError ("<source>:<line>:<col>: <what is wrong>").
Scenario parse_scenario(const std::string& text, const std::string& source);

/// Checks, before anything runs, that every expectation's include/exclude patterns select at
/// least one tensor of the records it names. Throws InputError naming the expectation and the
/// position of its patterns.
void check_expectation_selections(const Scenario& sc);

/// Reads and parses a scenario file. Throws InputError when it cannot be read or parsed.
Scenario load_scenario(const std::string& path);

}  // namespace mtp::scenario
