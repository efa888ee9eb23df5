// File: harness/report/faster.h
//
// Expectation class "faster:X" (issue 23): a layout's simulated step (harness/sim) against
// another's, so that a layout change that breaks the pipeline's balance fails `check` the way a
// changed bit does. Nothing is trained.
//
// Example:
//   ExpectationResult r = evaluate_faster(e, sc.model);
//   r.pairs[0].verdict;  // "simulated step 12471.8 ms = 0.822 x 15179.2 ms (at most 0.9) …"
#pragma once

#include "harness/report/report.h"

namespace mtp::report {

/// One pair: baseline = layouts[0], other = layouts[1]; holds when the candidate's simulated step
/// is at most at_most × the baseline's. The model is the claim's preset or `scenario_model`.
/// Throws InputError when a layout, the schedule or the costs file is bad (parse_scenario checked
/// them, so only a costs file changed since).
ExpectationResult evaluate_faster(const scenario::Expectation& e,
                                  const config::ModelConfig& scenario_model);

/// The `mtp-harness simulate` command that reproduces a faster claim's two steps (its preset or
/// --scenario `scenario_source`, costs, P, M, schedule, --split).
std::string resimulate_command(const scenario::Expectation& e, const std::string& scenario_source);

}  // namespace mtp::report
