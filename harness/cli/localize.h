// File: harness/cli/localize.h
//
// compare --localize: two digest-only records that differ name only the first differing block,
// and cannot decide a class that allows some difference (ulp, tol). Each record embeds the
// scenario text and the variant that made it (engine/step_recorder.h), so both variants are
// re-trained up to the last step in question with those steps kept in full, the re-runs are
// checked to reproduce the records' digests, and the full tensors are compared: to name the
// element, its values and bits, and to decide the class.
#pragma once

#include <set>
#include <string>

#include "harness/compare/compare.h"

namespace mtp::cli {

/// What a localisation found.
struct Localized {
  compare::CompareResult result;  ///< the re-runs compared at the steps (full tensors)
  std::string a_rerun, b_rerun;   ///< their records (kept in `dir`)
  std::string notes;              ///< reproduction checks, one line each ("# …\n")
  /// Both re-runs reproduce their record's digests at every step up to the last one: only then
  /// does `result` speak for the records.
  bool reproduced = false;
};

/// Re-trains the variants of records `a` and `b` (from their scenario_text, variant, device and
/// start attributes) through the last of `steps` with those steps in full, into `dir`, and
/// compares them at `steps` under `cls` on `sel`'s groups and patterns. Throws InputError when a
/// record lacks what a re-run needs (a record of schema version 1, no scenario text), or what
/// planning and training throw.
Localized localize(const std::string& a, const std::string& b, const std::set<int>& steps,
                   const compare::CompareClass& cls, const compare::Selection& sel,
                   const std::string& dir);

}  // namespace mtp::cli
