// File: candidate/candidate.h
//
// The MTP-standalone design (Megatron-LM PR 5247a1f460, "Support placing MTP layers into
// standalone stages"; spec §3): `m` may sit in any legal stage; the trunk final layernorm runs
// with decoder layer N; from the MTP stage on, stages carry concat(h0, h1, …, hD) along the
// sequence, [(1+D)·s, b, H] (static p2p shape table, spec §3.4); the loss stage splits it into
// main + D chunks and runs every head and loss on one code path; the embedding group is
// [first] ∪ [last if tied] ∪ [MTP stage], and the MTP stage's embedding copy starts equal to the
// first stage's and stays equal (its grads are summed with the first stage's every step).
#pragma once

#include <memory>

#include "harness/engine/chunk.h"

namespace mtp::candidate {

/// The candidate implementation. Runs co-located layouts (`…mL`) too.
std::unique_ptr<engine::Implementation> make_candidate();

}  // namespace mtp::candidate
