// File: scenarios/embedded.h
//
// The scenarios compiled into the mtp-harness binary.
#pragma once

#include <string>
#include <vector>

namespace mtp::scenarios {

/// The text of scenarios/default.toml at build time.
const char* default_scenario_text();

/// The text of scenarios/faults.toml at build time (mtp-harness selftest).
const char* faults_scenario_text();

/// The built-in models of `mtp-harness equiv`: "default" (scenarios/default.toml: 8 dense
/// layers, D = 2) and "tiny-moe" (scenarios/overlap.toml: 8 layers, 7 of them MoE, D = 1). The
/// text of the scenario that defines the model (its [model], [training] and [data] are used),
/// or nullptr for another name.
const char* builtin_model_text(const std::string& name);

/// The names builtin_model_text accepts.
std::vector<std::string> builtin_model_names();

}  // namespace mtp::scenarios
