// File: harness/record/digest.h
//
// Digests of recorded tensors (record.h): a tensor's raw bytes are cut into blocks of
// kDigestBlockElements elements (the last block shorter); each block's digest is XXH3-128
// (libxxhash, seed 0) of its bytes, and the tensor's digest is XXH3-128 (seed 0) of the
// concatenation of its block digests in block order, each in XXH3's canonical 16-byte big-endian
// form. A tensor of no elements has no block and the digest of the empty string.
//
// The definition depends only on the bytes and the element size, never on how many threads
// computed it: blocks are independent and combined in one fixed order. Two tensors with equal
// digests are taken as equal (a collision of 128-bit XXH3 is not a practical concern for a
// comparison of training records); differing block digests localise a difference to
// kDigestBlockElements elements without the data.
//
// Example:
//   TensorDigest d = digest_bytes(t.bytes.data(), t.bytes.size(), dtype_size(t.dtype));
//   std::cout << d.whole.hex();   // "3f2a…" (32 hex digits)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mtp::record {

/// Elements per digest block: 65536 (256 KiB of float32).
inline constexpr int64_t kDigestBlockElements = 65536;

/// Digest128: one XXH3-128 value.
struct Digest128 {
  uint64_t high = 0;
  uint64_t low = 0;
  /// 32 lowercase hex digits, high half first (XXH3's canonical order).
  std::string hex() const;
  /// Inverse of hex(); nullopt unless `s` is exactly 32 hex digits.
  static std::optional<Digest128> parse_hex(const std::string& s);
  bool operator==(const Digest128& o) const { return high == o.high && low == o.low; }
  bool operator!=(const Digest128& o) const { return !(*this == o); }
};

/// TensorDigest: the digest of a tensor and of each of its blocks.
struct TensorDigest {
  Digest128 whole;
  std::vector<Digest128> blocks;  ///< ceil(numel / block_elements) entries
  int64_t block_elements = kDigestBlockElements;

  /// Index of the first block whose digest differs from `other`'s (or the first block one of
  /// them lacks), nullopt when every block agrees.
  std::optional<int64_t> first_differing_block(const TensorDigest& other) const;
  /// Number of blocks that differ (blocks one digest lacks count as differing).
  int64_t differing_blocks(const TensorDigest& other) const;
};

/// digest_bytes: the digest of `nbytes` bytes of elements of `element_size` bytes (nbytes must
/// be a multiple of it). `threads` > 1 hashes blocks on that many threads; the result does not
/// depend on it. Throws InternalError when nbytes is not a multiple of element_size.
TensorDigest digest_bytes(const void* data, size_t nbytes, int element_size, int threads = 1);

/// default_digest_threads: threads the step recorder's writer digests one large tensor's blocks
/// with: half the hardware threads, between 1 and 8 (the result does not depend on it).
int default_digest_threads();

/// combine_block_digests: the tensor digest of these block digests (XXH3-128 of their canonical
/// bytes in order).
Digest128 combine_block_digests(const std::vector<Digest128>& blocks);

}  // namespace mtp::record
