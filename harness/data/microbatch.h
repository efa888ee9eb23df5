// File: harness/data/microbatch.h
//
// Cuts a TokenSource into microbatches: the same tokens, labels and loss masks for every
// variant of a scenario (bitwise invariant 1, architecture.md §5).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/data/token_source.h"

namespace mtp::data {

/// One microbatch, row-major [b, s].
struct Microbatch {
  std::vector<int32_t> tokens;     ///< [b, s] input ids t[i]
  std::vector<int32_t> labels;     ///< [b, s] next-token ids t[i+1]
  std::vector<uint8_t> loss_mask;  ///< [b, s] 1 = counts in the loss
  /// [b, s] 0..s−1 in every row: Megatron's GPTDataset with reset_position_ids = False (its
  /// default; resetting per document is not supported). The model's RoPE uses these positions
  /// in the trunk and in every MTP depth (megatron_conventions.md 3).
  std::vector<int32_t> position_ids;
};

/// Where the engine's microbatches come from: cut from a TokenSource (MicrobatchBuilder), or
/// served from a step record (engine/recorded_batches.h, mtp-harness replay).
class MicrobatchSource {
 public:
  virtual ~MicrobatchSource() = default;
  /// Microbatch `microbatch` ∈ [0, num_microbatches) of optimizer step `step` ≥ 1. The engine
  /// asks for global microbatch mb·DP + d of DP·M for microbatch mb of data-parallel rank d.
  virtual Microbatch build(int64_t step, int64_t microbatch, int64_t num_microbatches) const = 0;
  /// The record's data_source attribute ("text:PATH (N bytes)").
  virtual std::string describe() const = 0;
  /// The record's data_sha256 attribute: lower-case hex SHA-256 of the file(s) read.
  virtual std::string sha256() const = 0;
};

/// Edge-case microbatches that real data produces (short documents, heavy masking). Each keeps
/// the data's tokens and labels unless it says otherwise.
enum class EdgeBatch {
  kData,  ///< "data": as the data gives it
  /// "first_label_only": loss_mask 1 at position 0 of every row, 0 elsewhere. MTP depth k rolls
  /// the mask left k times (zero fill), so no depth has a valid token: every MTP term is 0.
  kFirstLabelOnly,
  /// "last_label_only": loss_mask 1 at position s−1 of every row, 0 elsewhere. The roll moves
  /// it to position s−1−k, so depth k (< s) keeps exactly one valid token per row.
  kLastLabelOnly,
  /// "first_two_labels": loss_mask 1 at positions 0 and 1 of every row, 0 elsewhere: depth 1
  /// keeps one valid token per row (position 0), every depth k ≥ 2 none, the main head two.
  kFirstTwoLabels,
  kAllMasked,  ///< "all_masked": loss_mask 0 everywhere (the main and every MTP count is 0)
  /// "repeated_token": every token and label of a row is the row's first data token; loss_mask 1
  /// everywhere.
  kRepeatedToken,
};

/// The EdgeBatch called `name`. Throws InputError listing the accepted names.
EdgeBatch parse_edge_batch(const std::string& name);

/// Sample j = ((step−1)·M + mb)·b + row holds s + 1 tokens cut as the source's SampleOrder says
/// (text: the window at (j·s) mod (size − s); Megatron: stream tokens j·s … j·s + s, documents
/// in order, wrapping into the next epoch): tokens = sample[0, s), labels = sample[1, s + 1).
/// loss_mask is 1 except where labels[i] == mask_token, and, with eod_mask_loss, where
/// tokens[i] == eod_token (Megatron gpt_dataset.py _get_ltor_masks_and_position_ids). Then the
/// edge batch of global microbatch (step−1)·M + mb, if any, is applied.
class MicrobatchBuilder : public MicrobatchSource {
 public:
  /// Throws InputError when the source has fewer than s + 1 tokens, holds ids ≥ vocab_size, or
  /// cfg names an unknown edge batch.
  MicrobatchBuilder(const TokenSource& source, const DataConfig& cfg, int64_t micro_batch_size,
                    int64_t seq_length, int64_t vocab_size);
  /// The same with only a label mask token (DataConfig defaults otherwise).
  MicrobatchBuilder(const TokenSource& source, int64_t micro_batch_size, int64_t seq_length,
                    int64_t vocab_size, int64_t mask_token);
  /// Microbatch `microbatch` ∈ [0, M) of optimizer step `step` ≥ 1.
  Microbatch build(int64_t step, int64_t microbatch, int64_t num_microbatches) const override;
  std::string describe() const override { return source_.describe(); }
  std::string sha256() const override { return source_.sha256(); }

 private:
  void read_sample(int64_t j, int32_t* out) const;
  void apply_edge_batch(EdgeBatch edge, Microbatch& mb) const;

  const TokenSource& source_;
  int64_t b_, s_, mask_token_, eod_token_;
  bool eod_mask_loss_;
  std::vector<EdgeBatch> edge_batches_;
  std::vector<double> mask_fractions_;  ///< DataConfig::mask_fractions
};

}  // namespace mtp::data
