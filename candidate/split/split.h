// File: candidate/split/split.h
//
// MTP depths spread over pipeline stages (Megatron-LM #5329 `mtp_layer_split`, which lifts the
// assertion "All of the MTP layers must be in the same one virtual pipeline stage",
// pipeline_parallel_layer_layout.py:131 at d98e8a6). Layouts such as `Et|t*3|t|t|t|tm|m|L` (P 4,
// V 2) put depth k in the stage of the k-th `m`; the stages holding `m` are consecutive, each in
// the last virtual stage and off pipeline rank 0 (layout::MtpRule::kSplit). Placement only, on
// the standalone family's stage code (engine/standalone_chunk.h): a stage holding depths a..b
// receives cat(h0, …, h_{a−1}) [a·s, b, H], rolls the token ids a − 1 times and embeds them
// through its own word-embedding copy, and sends cat(h0, …, h_b) on; from the last MTP stage on
// the stages carry [(1+D)·s, b, H] as the candidate's do. The embedding group is stage 0, every
// MTP stage and (tied) the loss stage; each copy starts equal to the first stage's and stays
// equal (every copy's grads are summed over the group every step).
#pragma once

#include <memory>

#include "harness/engine/chunk.h"

namespace mtp::split {

/// The split implementation. Runs every layout the candidate runs (one MTP stage) too.
std::unique_ptr<engine::Implementation> make_split();

}  // namespace mtp::split
