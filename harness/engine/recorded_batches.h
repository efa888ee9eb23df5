// File: harness/engine/recorded_batches.h
//
// Microbatches served from a record (mtp-harness replay): global microbatch g of step N is row g
// of the record's /steps/N/batch/{tokens, labels, loss_mask} [K, b, s] (K = DP·M, microbatch mb
// of data-parallel rank d at mb·DP + d, as the engine records them). The engine asks every
// MicrobatchSource for global microbatches in that order, so a record replays under any DP that
// divides K.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/data/microbatch.h"
#include "harness/record/record.h"

namespace mtp::engine {

class RecordedBatches final : public data::MicrobatchSource {
 public:
  /// Reads the batches of steps first … last of `rec`, each [K, b, s]. Throws RecordError naming
  /// the record, the object path and the rule: a step or a batch tensor is missing; a shape is
  /// not [K, b, s]; tokens or labels are not integers in [0, vocab_size); a loss mask holds
  /// anything but 0 and 1 (integer or floating dtypes).
  RecordedBatches(const record::RecordReader& rec, int64_t first, int64_t last, int64_t K,
                  int64_t micro_batch_size, int64_t seq_length, int64_t vocab_size);
  /// Row `microbatch` of step `step`; position ids 0 … s − 1. Throws InputError when the step
  /// was not read or `num_microbatches` is not K.
  data::Microbatch build(int64_t step, int64_t microbatch, int64_t num_microbatches) const override;
  /// "record:PATH steps A-B (K microbatches of [b, s])".
  std::string describe() const override;
  /// SHA-256 of the record file.
  std::string sha256() const override { return sha256_; }

 private:
  struct Step {
    std::vector<int32_t> tokens, labels;  ///< [K, b, s]
    std::vector<uint8_t> loss_mask;       ///< [K, b, s]
  };
  std::string path_, sha256_;
  int64_t first_, last_, K_, b_, s_;
  std::map<int64_t, Step> steps_;
};

}  // namespace mtp::engine
