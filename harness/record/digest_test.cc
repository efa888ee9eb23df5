#include "harness/record/digest.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <vector>

#include "harness/common/error.h"

namespace mtp::record {
namespace {

// The digest's definition, spelled out independently of digest.cc: XXH3-128 of each block's
// bytes; XXH3-128 of the blocks' canonical (big-endian, high half first) 16 bytes in order.
Digest128 reference_digest(const std::vector<float>& v) {
  std::vector<unsigned char> canonical;
  const size_t block_bytes = kDigestBlockElements * sizeof(float);
  const size_t nbytes = v.size() * sizeof(float);
  for (size_t begin = 0; begin < nbytes; begin += block_bytes) {
    const size_t n = std::min(block_bytes, nbytes - begin);
    const XXH128_hash_t h =
        XXH3_128bits(reinterpret_cast<const unsigned char*>(v.data()) + begin, n);
    for (int shift = 56; shift >= 0; shift -= 8) canonical.push_back((h.high64 >> shift) & 0xff);
    for (int shift = 56; shift >= 0; shift -= 8) canonical.push_back((h.low64 >> shift) & 0xff);
  }
  const XXH128_hash_t w = XXH3_128bits(canonical.data(), canonical.size());
  return Digest128{w.high64, w.low64};
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.25f - 3.0f;
  return v;
}

TEST(DigestTest, EmptyTensorIsTheDigestOfTheEmptyString) {
  const TensorDigest d = digest_bytes(nullptr, 0, 4);
  EXPECT_TRUE(d.blocks.empty());
  // XXH3-128 of no bytes (xxHash's published test vector for the empty input, seed 0).
  EXPECT_EQ(d.whole.hex(), "99aa06d3014798d86001c324468d497f");
}

TEST(DigestTest, MatchesTheDefinitionBlockByBlock) {
  // 2.5 blocks: two full blocks and a short last one.
  const std::vector<float> v = ramp(kDigestBlockElements * 5 / 2);
  const TensorDigest d = digest_bytes(v.data(), v.size() * sizeof(float), sizeof(float));
  ASSERT_EQ(d.blocks.size(), 3u);
  const XXH128_hash_t last = XXH3_128bits(v.data() + 2 * kDigestBlockElements,
                                          (v.size() - 2 * kDigestBlockElements) * sizeof(float));
  EXPECT_EQ(d.blocks[2].high, last.high64);
  EXPECT_EQ(d.blocks[2].low, last.low64);
  EXPECT_EQ(d.whole, reference_digest(v));
  EXPECT_EQ(d.whole, combine_block_digests(d.blocks));
}

TEST(DigestTest, DoesNotDependOnTheThreadCount) {
  const std::vector<float> v = ramp(kDigestBlockElements * 7 + 11);
  const TensorDigest one = digest_bytes(v.data(), v.size() * sizeof(float), sizeof(float), 1);
  for (int threads : {2, 3, 8, 64}) {
    const TensorDigest many =
        digest_bytes(v.data(), v.size() * sizeof(float), sizeof(float), threads);
    EXPECT_EQ(many.whole, one.whole) << threads << " threads";
    EXPECT_EQ(many.blocks.size(), one.blocks.size());
    EXPECT_EQ(many.first_differing_block(one), std::nullopt);
  }
}

TEST(DigestTest, OneFlippedBitChangesExactlyItsBlock) {
  std::vector<float> v = ramp(kDigestBlockElements * 4);
  const TensorDigest before = digest_bytes(v.data(), v.size() * sizeof(float), sizeof(float));
  const size_t element = 2 * kDigestBlockElements + 17;
  uint32_t bits;
  std::memcpy(&bits, &v[element], 4);
  bits ^= 1u;  // the last mantissa bit: one ULP
  std::memcpy(&v[element], &bits, 4);
  const TensorDigest after = digest_bytes(v.data(), v.size() * sizeof(float), sizeof(float));
  EXPECT_NE(before.whole, after.whole);
  EXPECT_EQ(before.first_differing_block(after), 2);
  EXPECT_EQ(before.differing_blocks(after), 1);
}

TEST(DigestTest, ElementSizeSetsTheBlockBoundary) {
  // The same 2 blocks' worth of float64 bytes are 4 blocks of float32.
  const std::vector<float> v = ramp(kDigestBlockElements * 4);
  EXPECT_EQ(digest_bytes(v.data(), v.size() * 4, 4).blocks.size(), 4u);
  EXPECT_EQ(digest_bytes(v.data(), v.size() * 4, 8).blocks.size(), 2u);
  EXPECT_THROW(digest_bytes(v.data(), 6, 4), InternalError);
}

TEST(DigestTest, MissingBlocksCountAsDiffering) {
  TensorDigest a, b;
  a.blocks = {{1, 2}, {3, 4}, {5, 6}};
  b.blocks = {{1, 2}, {3, 4}};
  EXPECT_EQ(a.first_differing_block(b), 2);
  EXPECT_EQ(a.differing_blocks(b), 1);
  b.blocks.push_back({5, 7});
  EXPECT_EQ(a.first_differing_block(b), 2);
}

TEST(DigestTest, HexRoundTripsAndRejectsOtherText) {
  const Digest128 d{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(d.hex(), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(Digest128::parse_hex(d.hex()), d);
  EXPECT_EQ(Digest128::parse_hex("0123456789ABCDEFFEDCBA9876543210"), d);
  EXPECT_EQ(Digest128::parse_hex(""), std::nullopt);
  EXPECT_EQ(Digest128::parse_hex("0123456789abcdeffedcba987654321"), std::nullopt);
  EXPECT_EQ(Digest128::parse_hex("0123456789abcdeffedcba987654321g"), std::nullopt);
}

}  // namespace
}  // namespace mtp::record
