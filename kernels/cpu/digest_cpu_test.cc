// cpu::block_digests and kernels/xxh3.h against libxxhash's XXH3_128bits, bit for bit: every
// input length through every short-input path and the long loop's round boundaries, any
// alignment, blocks hashed independently, and the errors it throws.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/xxh3.h"

namespace mtp::kernels::cpu {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(gen());
  return v;
}

::testing::AssertionResult same_as_libxxhash(const uint8_t* p, size_t n) {
  const XXH128_hash_t want = XXH3_128bits(p, n);
  const xxh3::Hash128 got = xxh3::hash128(p, n, xxh3::kDefaultSecret);
  if (got.low == want.low64 && got.high == want.high64) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "length " << n << ": got " << std::hex << got.high << ":" << got.low << ", libxxhash "
         << want.high64 << ":" << want.low64;
}

TEST(Xxh3Test, EveryLengthUpTo4KiBEqualsLibxxhash) {
  // 0, 1–3, 4–8, 9–16, 17–128, 129–240, then the long loop: partial rounds, 1 KiB boundaries.
  const std::vector<uint8_t> data = random_bytes(4096 + 8, 11);
  for (size_t n = 0; n <= 4096; ++n) ASSERT_TRUE(same_as_libxxhash(data.data(), n));
}

TEST(Xxh3Test, DigestBlockSizesAndOddLengthsEqualLibxxhash) {
  // The record's blocks: 64 Ki elements of 1, 2, 4 and 8 bytes, and lengths around them.
  const std::vector<uint8_t> data = random_bytes((size_t{1} << 19) + 64, 12);
  for (size_t n : {size_t{65536}, size_t{131072}, size_t{262144}, size_t{524288}, size_t{262143},
                   size_t{262145}, size_t{131071}, size_t{99999}, size_t{1025}, size_t{2047}}) {
    ASSERT_TRUE(same_as_libxxhash(data.data(), n));
  }
}

TEST(Xxh3Test, AnyAlignmentEqualsLibxxhash) {
  const std::vector<uint8_t> data = random_bytes(70000, 13);
  for (size_t offset = 1; offset < 8; ++offset) {
    for (size_t n : {size_t{3}, size_t{15}, size_t{100}, size_t{200}, size_t{241}, size_t{65536}}) {
      ASSERT_TRUE(same_as_libxxhash(data.data() + offset, n)) << "offset " << offset;
    }
  }
}

TEST(Xxh3Test, ZeroAndConstantInputsEqualLibxxhash) {
  for (uint8_t fill : {uint8_t{0}, uint8_t{0xff}, uint8_t{0x80}}) {
    const std::vector<uint8_t> data(300000, fill);
    for (size_t n : {size_t{0}, size_t{1}, size_t{16}, size_t{128}, size_t{240}, size_t{1024},
                     size_t{262144}, size_t{300000}}) {
      ASSERT_TRUE(same_as_libxxhash(data.data(), n)) << "fill " << int(fill);
    }
  }
}

TEST(BlockDigestsCpuTest, EachBlockIsTheDigestOfItsBytes) {
  const uint64_t block = 4096;
  const std::vector<uint8_t> data = random_bytes(3 * block + 1000, 14);  // 4 blocks, last short
  std::vector<uint64_t> out(8, 0xdeadbeefULL);                           // poisoned
  block_digests(data.data(), data.size(), block, out.data());
  for (size_t b = 0; b < 4; ++b) {
    const size_t len = b < 3 ? block : 1000;
    const XXH128_hash_t want = XXH3_128bits(data.data() + b * block, len);
    EXPECT_EQ(out[2 * b], want.high64) << "block " << b;
    EXPECT_EQ(out[2 * b + 1], want.low64) << "block " << b;
  }
  // One byte changed: only its block's digest changes.
  std::vector<uint8_t> other = data;
  other[2 * block + 17] ^= 1;
  std::vector<uint64_t> out2(8);
  block_digests(other.data(), other.size(), block, out2.data());
  for (size_t b = 0; b < 4; ++b) {
    const bool same = out[2 * b] == out2[2 * b] && out[2 * b + 1] == out2[2 * b + 1];
    EXPECT_EQ(same, b != 2) << "block " << b;
  }
}

TEST(BlockDigestsCpuTest, EmptyInputWritesNothingAndBadArgumentsThrow) {
  std::vector<uint64_t> out(2, 7);
  block_digests(nullptr, 0, 64, out.data());
  EXPECT_EQ(out[0], 7u);
  const uint8_t byte = 1;
  EXPECT_THROW(block_digests(&byte, 1, 0, out.data()), std::invalid_argument);
  EXPECT_THROW(block_digests(&byte, 1, (uint64_t{1} << 19) + 1, out.data()), std::invalid_argument);
  EXPECT_THROW(block_digests(nullptr, 1, 64, out.data()), std::invalid_argument);
  EXPECT_THROW(block_digests(&byte, 1, 64, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace mtp::kernels::cpu
