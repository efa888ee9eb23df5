// File: harness/data/token_source.h
//
// Where training tokens come from. A TokenSource is a flat, read-only token stream; the
// MicrobatchBuilder cuts it into microbatches that are identical for every variant.
// Implemented: byte-level text files (vocab 256). The interface is what a Megatron indexed
// dataset (.bin/.idx, megatron/core/datasets/indexed_dataset.py) needs as well: a token count,
// random access reads, and a content digest.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtp::data {

/// A flat, read-only stream of token ids.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
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

/// What the scenario's [data] table says.
struct DataConfig {
  std::string kind = "text";                               ///< "text" (byte-level)
  std::string path = "/usr/share/common-licenses/GPL-3";   ///< base-files, on every Debian/Ubuntu
  /// Token whose label positions get loss_mask 0 (Megatron's eod_mask_loss with this id as the
  /// end-of-document token); −1 = every position counts.
  int64_t mask_token = -1;
};

/// Opens the source `cfg` names. Throws InputError naming the path and the problem (missing,
/// unreadable, empty, unknown kind).
std::unique_ptr<TokenSource> open_token_source(const DataConfig& cfg);

/// Every byte of a file as one token (ids 0..255).
class TextFileSource : public TokenSource {
 public:
  /// Reads the whole file. Throws InputError naming the path and the system's reason when it is
  /// missing (or a symlink loop, ...), not a regular file, unreadable (/proc/self/mem), empty or
  /// over 1 GiB.
  explicit TextFileSource(const std::string& path);
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

/// Lower-case hex SHA-256 of `size` bytes (OpenSSL EVP).
std::string sha256_hex(const uint8_t* data, size_t size);

}  // namespace mtp::data
