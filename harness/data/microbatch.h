// File: harness/data/microbatch.h
//
// Cuts a TokenSource into microbatches: the same tokens, labels and loss masks for every
// variant of a scenario (bitwise invariant 1, architecture.md §5).
#pragma once

#include <cstdint>
#include <vector>

#include "harness/data/token_source.h"

namespace mtp::data {

/// One microbatch, row-major [b, s].
struct Microbatch {
  std::vector<int32_t> tokens;    ///< [b, s] input ids t[i]
  std::vector<int32_t> labels;    ///< [b, s] next-token ids t[i+1]
  std::vector<uint8_t> loss_mask; ///< [b, s] 1 = counts in the loss
};

/// Sample j = ((step−1)·M + mb)·b + row reads the window of s+1 tokens starting at
/// (j·s) mod (size − s): tokens = window[0, s), labels = window[1, s+1). Position ids are 0..s−1.
class MicrobatchBuilder {
 public:
  /// Throws InputError when the source has fewer than s + 1 tokens, or holds ids ≥ vocab_size.
  MicrobatchBuilder(const TokenSource& source, int64_t micro_batch_size, int64_t seq_length,
                    int64_t vocab_size, int64_t mask_token);
  /// Microbatch `microbatch` ∈ [0, M) of optimizer step `step` ≥ 1.
  Microbatch build(int64_t step, int64_t microbatch, int64_t num_microbatches) const;

 private:
  const TokenSource& source_;
  int64_t b_, s_, mask_token_;
};

}  // namespace mtp::data
