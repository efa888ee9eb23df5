// File: harness/data/token_source.h
//
// Where training tokens come from. A TokenSource is a flat, read-only token stream; the
// MicrobatchBuilder cuts it into microbatches that are identical for every variant.
// Implemented: byte-level text files (vocab 256) and Megatron indexed datasets (.bin/.idx,
// megatron/core/datasets/indexed_dataset.py; harness/data/indexed_dataset.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/data/indexed_dataset.h"

namespace mtp::data {

/// How the MicrobatchBuilder cuts sample j (s + 1 tokens) from a TokenSource of `size` tokens.
enum class SampleOrder {
  /// Tokens [(j·s) mod (size − s), … + s]: windows that never wrap (byte-level text).
  kWindows,
  /// Tokens j·s … j·s + s of the stream repeated end to end, i.e. token i of the sample is
  /// stream[(j·s + i) mod size]: Megatron's GPTDataset sample index (helpers.cpp
  /// build_sample_idx, add_extra_token_to_sequence) over epochs of the documents in order,
  /// with neither the document nor the sample shuffle.
  kEpochs,
};

/// A flat, read-only stream of token ids.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  /// How samples are cut from this stream.
  virtual SampleOrder sample_order() const = 0;
  /// Number of tokens.
  virtual int64_t size() const = 0;
  /// Smallest vocabulary that holds every id this source can return.
  virtual int64_t min_vocab_size() const = 0;
  /// Copies tokens [offset, offset + count) to `out`. Throws InternalError when out of range.
  virtual void read(int64_t offset, int64_t count, int32_t* out) const = 0;
  /// "text:/usr/share/common-licenses/GPL-3 (35149 bytes)".
  virtual std::string describe() const = 0;
  /// Lower-case hex SHA-256 of the underlying file(s) as read.
  virtual std::string sha256() const = 0;
};

/// What the scenario's [data] table says (scenarios/README.md).
struct DataConfig {
  std::string kind = "text";  ///< "text" (byte-level) | "megatron" (indexed dataset)
  std::string path = "/usr/share/common-licenses/GPL-3";  ///< text: base-files, on every Debian
  std::string path_prefix;  ///< megatron: PREFIX of PREFIX.idx and PREFIX.bin
  /// Positions whose *label* is this token get loss_mask 0; −1 = none. Not Megatron's
  /// eod_mask_loss, which masks positions whose *input* is the EOD token (eod_mask_loss below).
  int64_t mask_token = -1;
  /// Megatron's end-of-document token (data prepare appends it to every document: 0, the EOD of
  /// Megatron's ByteLevelTokenizer).
  int64_t eod_token = 0;
  /// Megatron's --eod-mask-loss (gpt_dataset.py _get_ltor_masks_and_position_ids): positions
  /// whose input token is eod_token get loss_mask 0.
  bool eod_mask_loss = false;
  /// Edge-case microbatches (microbatch.h EdgeBatch names): global microbatch g = (step−1)·M + mb
  /// takes edge_batches[g mod size]; empty = every microbatch as the data gives it.
  std::vector<std::string> edge_batches;
  /// Uneven masks: the step's microbatch j (of its DP·M, j = microbatch·DP + data-parallel rank)
  /// drops fraction mask_fractions[j mod n] of its still-valid label positions, a position
  /// dropped when a hash of (step, global microbatch, element) is below the fraction; with
  /// n = DP each data-parallel rank keeps its own density at every step. Applied before the
  /// edge batches; empty = none. Each entry in [0, 1].
  std::vector<double> mask_fractions;
};

/// Opens the source `cfg` names. Throws InputError naming the path and the problem (missing,
/// unreadable, empty, corrupted, unknown kind).
std::unique_ptr<TokenSource> open_token_source(const DataConfig& cfg);

/// Every byte of a file as one token (ids 0..255).
class TextFileSource : public TokenSource {
 public:
  /// Reads the whole file. Throws InputError naming the path and the system's reason when it is
  /// missing (or a symlink loop, ...), not a regular file, unreadable (/proc/self/mem), empty or
  /// over 1 GiB.
  explicit TextFileSource(const std::string& path);
  SampleOrder sample_order() const override { return SampleOrder::kWindows; }
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  int64_t min_vocab_size() const override { return 256; }
  void read(int64_t offset, int64_t count, int32_t* out) const override;
  std::string describe() const override;
  std::string sha256() const override { return sha256_; }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  std::string sha256_;
};

/// A Megatron indexed dataset: every sequence's tokens in index order, sampled as Megatron's
/// GPTDataset does with documents in order (SampleOrder::kEpochs). The tokens are decoded from
/// the .bin as they are read: memory is the files' size plus what a read asks for, however many
/// tokens overlapping sequences declare.
class MegatronSource : public TokenSource {
 public:
  /// Reads PREFIX.idx and PREFIX.bin (open_indexed_dataset; InputError when invalid).
  explicit MegatronSource(const std::string& path_prefix);
  SampleOrder sample_order() const override { return SampleOrder::kEpochs; }
  int64_t size() const override { return ds_.num_tokens(); }
  int64_t min_vocab_size() const override { return max_id_ + 1; }
  void read(int64_t offset, int64_t count, int32_t* out) const override;
  /// "megatron:PREFIX (3 documents, 3 sequences, 120 tokens, uint16)".
  std::string describe() const override;
  std::string sha256() const override { return ds_.sha256; }
  const IndexedDataset& dataset() const { return ds_; }

 private:
  IndexedDataset ds_;
  int64_t max_id_ = 0;
};

/// Lower-case hex SHA-256 of `size` bytes (OpenSSL EVP).
std::string sha256_hex(const uint8_t* data, size_t size);
/// Lower-case hex SHA-256 of the concatenation of `parts` (pointer, byte count).
std::string sha256_hex(const std::vector<std::pair<const uint8_t*, size_t>>& parts);
/// Lower-case hex SHA-256 of the file `path`, read in blocks (any size). Throws InputError
/// "data: <what> '<path>' ..." when it cannot be opened or read.
std::string sha256_file(const std::string& path, const std::string& what);

}  // namespace mtp::data
