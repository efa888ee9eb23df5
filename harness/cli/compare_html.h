// File: harness/cli/compare_html.h
//
// compare --html: the comparison of two records as the same self-contained HTML page that
// `check` writes for a scenario (report::to_html): both records' runs and loss curves, the
// verdict, and for a failing comparison the heatmap of tensors × steps with the first divergence
// and its owning stage. It serves records the harness did not make as well (Megatron-LM's own,
// ci/megatron_recorder/): the facts come from the records' attributes.
#pragma once

#include <string>

#include "harness/compare/compare.h"

namespace mtp::cli {

/// What the page shows beyond the comparison itself.
struct CompareVerdict {
  bool holds = false;
  bool undecided = false;
  std::string nonfinite;  ///< non-empty: a record holds a non-finite value (the pair fails)
};

/// The HTML page of `compare a b` (paths) whose result is `r` under `cls` on `sel`. Each record
/// is labelled by its `variant` attribute (else its file name; "A: …"/"B: …" when they are the
/// same). Throws RecordError when a record's losses cannot be read.
std::string compare_html(const std::string& a, const std::string& b,
                         const compare::CompareClass& cls, const compare::Selection& sel,
                         const compare::CompareResult& r, const CompareVerdict& v);

}  // namespace mtp::cli
