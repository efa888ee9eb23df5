// File: harness/config/record_ref.h
//
// A step of a step record named on the command line or in a scenario: "REC.h5:STEP" or
// "REC.h5" ([training] init_from, --init-from, --resume, replay). Torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace mtp::config {

/// /steps/<step> of the record at `path`.
struct RecordRef {
  std::string path;
  int64_t step = 0;
  /// "REC.h5:STEP" (the form parse_record_ref reads back).
  std::string text() const;
};

/// Parses "PATH[:STEP]". The text after the last ':' is the step when it holds no '/' and no
/// '.' (so "runs/a.h5" and "C:/x.h5"-like paths stay whole); it must then be a decimal integer
/// in [0, 1000000]. Without a step, `default_step` is used; `default_step` < 0 makes the step
/// required. Throws InputError (without location: callers prefix the key or flag) naming the
/// text and the rule: empty path, empty step, a step that is not a non-negative integer, a
/// missing required step.
RecordRef parse_record_ref(const std::string& text, int64_t default_step);

}  // namespace mtp::config
