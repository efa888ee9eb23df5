// File: scenarios/embedded.h
//
// The scenarios compiled into the mtp-harness binary.
#pragma once

namespace mtp::scenarios {

/// The text of scenarios/default.toml at build time.
const char* default_scenario_text();

}  // namespace mtp::scenarios
