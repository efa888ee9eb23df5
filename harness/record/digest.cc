// Digests of recorded tensors: XXH3-128 per block, XXH3-128 of the canonical block digests for
// the tensor (digest.h).

#include "harness/record/digest.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp::record {

std::string Digest128::hex() const { return fmt::format("{:016x}{:016x}", high, low); }

std::optional<Digest128> Digest128::parse_hex(const std::string& s) {
  if (s.size() != 32) return std::nullopt;
  uint64_t half[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    const char c = s[i];
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    half[i / 16] = (half[i / 16] << 4) | static_cast<uint64_t>(v);
  }
  return Digest128{half[0], half[1]};
}

std::optional<int64_t> TensorDigest::first_differing_block(const TensorDigest& other) const {
  const size_t n = std::max(blocks.size(), other.blocks.size());
  for (size_t i = 0; i < n; ++i) {
    if (i >= blocks.size() || i >= other.blocks.size() || blocks[i] != other.blocks[i]) {
      return static_cast<int64_t>(i);
    }
  }
  return std::nullopt;
}

int64_t TensorDigest::differing_blocks(const TensorDigest& other) const {
  const size_t common = std::min(blocks.size(), other.blocks.size());
  int64_t n = static_cast<int64_t>(std::max(blocks.size(), other.blocks.size()) - common);
  for (size_t i = 0; i < common; ++i) n += blocks[i] != other.blocks[i] ? 1 : 0;
  return n;
}

namespace {

Digest128 xxh3_128(const void* data, size_t n) {
  const XXH128_hash_t h = XXH3_128bits(data, n);
  return Digest128{h.high64, h.low64};
}

}  // namespace

int default_digest_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp<unsigned>(hw > 2 ? hw / 2 : 1, 1, 8));
}

Digest128 combine_block_digests(const std::vector<Digest128>& blocks) {
  std::vector<unsigned char> canonical(blocks.size() * sizeof(XXH128_canonical_t));
  for (size_t i = 0; i < blocks.size(); ++i) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH128_hash_t{blocks[i].low, blocks[i].high});
    std::memcpy(canonical.data() + i * sizeof c, &c, sizeof c);
  }
  return xxh3_128(canonical.data(), canonical.size());
}

TensorDigest digest_bytes(const void* data, size_t nbytes, int element_size, int threads) {
  MTP_INTERNAL_ASSERT(element_size > 0 && nbytes % static_cast<size_t>(element_size) == 0,
                      fmt::format("digest of {} bytes of {}-byte elements", nbytes, element_size));
  TensorDigest d;
  const size_t block_bytes =
      static_cast<size_t>(kDigestBlockElements) * static_cast<size_t>(element_size);
  const size_t nblocks = (nbytes + block_bytes - 1) / block_bytes;
  d.blocks.resize(nblocks);
  const auto* bytes = static_cast<const unsigned char*>(data);
  auto hash_range = [&](size_t first, size_t last) {
    for (size_t i = first; i < last; ++i) {
      const size_t begin = i * block_bytes;
      d.blocks[i] = xxh3_128(bytes + begin, std::min(block_bytes, nbytes - begin));
    }
  };
  const size_t workers = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), nblocks);
  if (workers <= 1) {
    hash_range(0, nblocks);
  } else {
    // Contiguous ranges of blocks per thread; each block's digest lands in its own slot, so the
    // result is the same for any thread count.
    std::vector<std::thread> pool;
    const size_t per = (nblocks + workers - 1) / workers;
    for (size_t w = 1; w < workers; ++w) {
      const size_t first = std::min(nblocks, w * per), last = std::min(nblocks, first + per);
      pool.emplace_back(hash_range, first, last);
    }
    hash_range(0, std::min(nblocks, per));
    for (auto& t : pool) t.join();
  }
  d.whole = combine_block_digests(d.blocks);
  return d;
}

}  // namespace mtp::record
