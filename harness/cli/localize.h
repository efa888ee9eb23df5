// File: harness/cli/localize.h
//
// compare --localize: two digest-only records that differ name only the first differing block.
// Each record embeds the scenario text and the variant that made it (engine/step_recorder.h), so
// both variants are re-trained up to the divergent step with that step kept in full, the re-runs
// are checked to reproduce the records' digests, and the full tensors are compared to name the
// element, its values and bits.
#pragma once

#include <string>

#include "harness/compare/compare.h"

namespace mtp::cli {

/// What a localisation found.
struct Localized {
  compare::CompareResult result;  ///< the re-runs compared at the divergent step (full tensors)
  std::string a_rerun, b_rerun;   ///< their records (kept in `dir`)
  std::string notes;              ///< reproduction checks, one line each ("# …\n")
};

/// Re-trains the variants of records `a` and `b` (from their scenario_text, variant, device and
/// start attributes) through step `step` with that step in full, into `dir`, and compares them
/// at `step` under `cls` on `sel`'s groups and patterns. Throws InputError when a record lacks
/// what a re-run needs (a record of schema version 1, no scenario text), or what planning and
/// training throw.
Localized localize(const std::string& a, const std::string& b, int step,
                   const compare::CompareClass& cls, const compare::Selection& sel,
                   const std::string& dir);

}  // namespace mtp::cli
