// File: harness/report/replicas.h
//
// Expectation class "replicas" (issue 22 item 4): every copy of every shared parameter — each
// data-parallel replica, each stage's copy of the word-embedding table (MTP stages, a tied
// output layer) — holds the recorded copy's bits at every step, the start step of a resumed run
// included. The run writes the copies to the record ([training] record_copies, group "copies",
// record/schema.h copy_name) instead of stopping at the first drift, so a drift is a finding
// with its step, copy, element and bits, and a planted drift (Megatron-Bridge #5380, the MTP
// stage's copy left out of the embedding group) is caught by a scenario expectation.
//
// Example:
//   ExpectationResult r = evaluate_replicas(e, {{"split_p5", "runs/x/split_p5.h5"}});
//   r.pairs[0].result.first_divergence->describe();
//   // "step 1 copies/embedding.word_embeddings.weight@dp0.stage4[3, 7]: a=… b=…"
#pragma once

#include <map>
#include <string>

#include "harness/report/report.h"

namespace mtp::report {

/// One pair per variant of `e` (baseline = the variant, other = "copies"): every dataset of the
/// copies group at each selected step (e.selection.steps; empty = every step of the record)
/// whose parameter (record::copied_param) matches e.selection include/exclude, compared bitwise
/// with the recorded copy of that step (model_weight in a bf16 record, else weight): a = the
/// copy, b = the recorded one; from digests when either is digest-only. A selected step without
/// the copies group is a structural failure (the run did not record copies). Throws RecordError
/// when a record cannot be read.
ExpectationResult evaluate_replicas(const scenario::Expectation& e,
                                    const std::map<std::string, std::string>& record_paths);

}  // namespace mtp::report
