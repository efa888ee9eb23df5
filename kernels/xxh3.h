// File: kernels/xxh3.h
//
// XXH3-128 (xxHash 0.8, seed 0, the default 192-byte secret) as host and device code, so that a
// tensor's record digests (harness/record/digest.h: XXH3-128 per block of 64 Ki elements) can be
// computed on the GPU that holds it, with the same value libxxhash gives on the host. Written
// from the algorithm as xxHash 0.8 specifies it (xxhash.h: XXH3_128bits with its short-input
// paths of 0, 1–3, 4–8, 9–16, 17–128 and 129–240 bytes and the long-input loop); the CPU test
// (kernels/cpu/kernels_cpu_test.cc) checks it against libxxhash bit for bit.
//
// The long-input loop (more than 240 bytes) is split so that it parallelises: the input is cut
// into 1 KiB rounds of 16 stripes of 64 bytes; a round adds to the 8 accumulator lanes a sum
// that depends only on its own bytes (round_sum), and the rounds are chained by the non-linear
// scramble (chain_rounds). Sums are mod 2^64, so any order of adding a round's stripes gives the
// same bits: the CUDA kernel (kernels/cuda/digest.cu) sums one round per warp, the host one round
// at a time, with identical results.
//
// Example:
//   const mtp::kernels::xxh3::Hash128 h = mtp::kernels::xxh3::hash128(bytes, n, kSecret);
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/numerics.h"  // MTP_KERNELS_HD

/// The default secret's bytes (xxHash's kSecret, from FARSH), for host and device arrays.
#define MTP_XXH3_DEFAULT_SECRET_BYTES                                                             \
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, \
      0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67,   \
      0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff,   \
      0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81,   \
      0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b,   \
      0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef,   \
      0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc,   \
      0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8,   \
      0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3,   \
      0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda,   \
      0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47,   \
      0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95,   \
      0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e

namespace mtp::kernels::xxh3 {

/// Hash128: an XXH3-128 value (libxxhash's XXH128_hash_t: low and high 64-bit halves).
struct Hash128 {
  uint64_t low = 0;
  uint64_t high = 0;
};

inline constexpr int kSecretSize = 192;       ///< the default secret's length
inline constexpr int kStripeBytes = 64;       ///< bytes one accumulate step reads
inline constexpr int kStripesPerRound = 16;   ///< (192 − 64) / 8
inline constexpr int kRoundBytes = 1024;      ///< 16 stripes
inline constexpr uint64_t kMidSizeMax = 240;  ///< longer inputs take the long loop

/// The default secret: every entry point takes a pointer to these 192 bytes (device code keeps
/// a copy in constant memory, kernels/cuda/digest.cu).
inline constexpr uint8_t kDefaultSecret[kSecretSize] = {MTP_XXH3_DEFAULT_SECRET_BYTES};

namespace detail {

inline constexpr uint64_t kP32_1 = 0x9E3779B1U;
inline constexpr uint64_t kP32_2 = 0x85EBCA77U;
inline constexpr uint64_t kP32_3 = 0xC2B2AE3DU;
inline constexpr uint64_t kP64_1 = 0x9E3779B185EBCA87ULL;
inline constexpr uint64_t kP64_2 = 0xC2B2AE3D27D4EB4FULL;
inline constexpr uint64_t kP64_3 = 0x165667B19E3779F9ULL;
inline constexpr uint64_t kP64_4 = 0x85EBCA77C2B2AE63ULL;
inline constexpr uint64_t kP64_5 = 0x27D4EB2F165667C5ULL;

/// Little-endian loads at any alignment (both targets are little-endian); 8-byte aligned loads
/// on the device are single instructions.
MTP_KERNELS_HD inline uint64_t read64(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  if ((reinterpret_cast<uintptr_t>(p) & 7u) == 0) return *reinterpret_cast<const uint64_t*>(p);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
#else
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
#endif
}
MTP_KERNELS_HD inline uint32_t read32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

MTP_KERNELS_HD inline uint32_t swap32(uint32_t x) {
  return (x << 24) | ((x << 8) & 0x00ff0000u) | ((x >> 8) & 0x0000ff00u) | (x >> 24);
}
MTP_KERNELS_HD inline uint64_t swap64(uint64_t x) {
  return static_cast<uint64_t>(swap32(static_cast<uint32_t>(x))) << 32 |
         swap32(static_cast<uint32_t>(x >> 32));
}
MTP_KERNELS_HD inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/// The full 128-bit product of two 64-bit values.
MTP_KERNELS_HD inline Hash128 mul128(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return Hash128{a * b, __umul64hi(a, b)};
#else
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return Hash128{static_cast<uint64_t>(p), static_cast<uint64_t>(p >> 64)};
#endif
}
MTP_KERNELS_HD inline uint64_t mul128_fold64(uint64_t a, uint64_t b) {
  const Hash128 p = mul128(a, b);
  return p.low ^ p.high;
}

MTP_KERNELS_HD inline uint64_t xorshift(uint64_t v, int s) { return v ^ (v >> s); }

MTP_KERNELS_HD inline uint64_t avalanche3(uint64_t h) {  // XXH3's avalanche
  h = xorshift(h, 37);
  h *= 0x165667919E3779F9ULL;
  return xorshift(h, 32);
}
MTP_KERNELS_HD inline uint64_t avalanche64(uint64_t h) {  // XXH64's avalanche
  h ^= h >> 33;
  h *= kP64_2;
  h ^= h >> 29;
  h *= kP64_3;
  h ^= h >> 32;
  return h;
}

MTP_KERNELS_HD inline uint64_t mix16(const uint8_t* in, const uint8_t* secret) {
  return mul128_fold64(read64(in) ^ read64(secret), read64(in + 8) ^ read64(secret + 8));
}

MTP_KERNELS_HD inline Hash128 mix32(Hash128 acc, const uint8_t* in1, const uint8_t* in2,
                                    const uint8_t* secret) {
  acc.low += mix16(in1, secret);
  acc.low ^= read64(in2) + read64(in2 + 8);
  acc.high += mix16(in2, secret + 16);
  acc.high ^= read64(in1) + read64(in1 + 8);
  return acc;
}

MTP_KERNELS_HD inline Hash128 finish_mid(Hash128 acc, uint64_t len) {
  Hash128 h;
  h.low = avalanche3(acc.low + acc.high);
  h.high = 0 - avalanche3(acc.low * kP64_1 + acc.high * kP64_4 + len * kP64_2);
  return h;
}

MTP_KERNELS_HD inline Hash128 hash_0to16(const uint8_t* in, uint64_t len, const uint8_t* secret) {
  Hash128 h;
  if (len > 8) {
    const uint64_t flip_lo = read64(secret + 32) ^ read64(secret + 40);
    const uint64_t flip_hi = read64(secret + 48) ^ read64(secret + 56);
    const uint64_t lo = read64(in);
    uint64_t hi = read64(in + len - 8);
    Hash128 m = mul128(lo ^ hi ^ flip_lo, kP64_1);
    m.low += (len - 1) << 54;
    hi ^= flip_hi;
    m.high += hi + static_cast<uint64_t>(static_cast<uint32_t>(hi)) * (kP32_2 - 1);
    m.low ^= swap64(m.high);
    h = mul128(m.low, kP64_2);
    h.high += m.high * kP64_2;
    h.low = avalanche3(h.low);
    h.high = avalanche3(h.high);
    return h;
  }
  if (len >= 4) {
    const uint64_t in64 = read32(in) + (static_cast<uint64_t>(read32(in + len - 4)) << 32);
    const uint64_t keyed = in64 ^ (read64(secret + 16) ^ read64(secret + 24));
    Hash128 m = mul128(keyed, kP64_1 + (len << 2));
    m.high += m.low << 1;
    m.low ^= m.high >> 3;
    m.low = xorshift(m.low, 35);
    m.low *= 0x9FB21C651E98DF25ULL;
    m.low = xorshift(m.low, 28);
    m.high = avalanche3(m.high);
    return m;
  }
  if (len > 0) {
    const uint32_t c1 = in[0], c2 = in[len >> 1], c3 = in[len - 1];
    const uint32_t lo32 = (c1 << 16) | (c2 << 24) | c3 | (static_cast<uint32_t>(len) << 8);
    const uint32_t hi32 = rotl32(swap32(lo32), 13);
    const uint64_t flip_lo = read32(secret) ^ read32(secret + 4);
    const uint64_t flip_hi = read32(secret + 8) ^ read32(secret + 12);
    h.low = avalanche64(lo32 ^ flip_lo);
    h.high = avalanche64(hi32 ^ flip_hi);
    return h;
  }
  h.low = avalanche64(read64(secret + 64) ^ read64(secret + 72));
  h.high = avalanche64(read64(secret + 80) ^ read64(secret + 88));
  return h;
}

MTP_KERNELS_HD inline Hash128 hash_17to128(const uint8_t* in, uint64_t len, const uint8_t* secret) {
  Hash128 acc{len * kP64_1, 0};
  if (len > 32) {
    if (len > 64) {
      if (len > 96) acc = mix32(acc, in + 48, in + len - 64, secret + 96);
      acc = mix32(acc, in + 32, in + len - 48, secret + 64);
    }
    acc = mix32(acc, in + 16, in + len - 32, secret + 32);
  }
  acc = mix32(acc, in, in + len - 16, secret);
  return finish_mid(acc, len);
}

MTP_KERNELS_HD inline Hash128 hash_129to240(const uint8_t* in, uint64_t len,
                                            const uint8_t* secret) {
  Hash128 acc{len * kP64_1, 0};
  const int rounds = static_cast<int>(len / 32);
  for (int i = 0; i < 4; ++i) acc = mix32(acc, in + 32 * i, in + 32 * i + 16, secret + 32 * i);
  acc.low = avalanche3(acc.low);
  acc.high = avalanche3(acc.high);
  for (int i = 4; i < rounds; ++i) {
    acc = mix32(acc, in + 32 * i, in + 32 * i + 16, secret + 3 + 32 * (i - 4));
  }
  // The last 32 bytes, read backwards, with the secret's bytes 103–134 (136 − 17 − 16).
  acc = mix32(acc, in + len - 16, in + len - 32, secret + 136 - 17 - 16);
  return finish_mid(acc, len);
}

/// One stripe's contribution to the 8 accumulator lanes (XXH3's accumulate_512, additive).
MTP_KERNELS_HD inline void add_stripe(uint64_t acc[8], const uint8_t* in, const uint8_t* secret) {
  for (int i = 0; i < 8; ++i) {
    const uint64_t v = read64(in + 8 * i);
    const uint64_t k = v ^ read64(secret + 8 * i);
    acc[i ^ 1] += v;
    acc[i] += (k & 0xffffffffULL) * (k >> 32);
  }
}

MTP_KERNELS_HD inline uint64_t merge_accs(const uint64_t acc[8], const uint8_t* secret,
                                          uint64_t start) {
  uint64_t r = start;
  for (int i = 0; i < 4; ++i) {
    r += mul128_fold64(acc[2 * i] ^ read64(secret + 16 * i),
                       acc[2 * i + 1] ^ read64(secret + 16 * i + 8));
  }
  return avalanche3(r);
}

/// A complete round's end: its lane sums added, then XXH3's scramble (secret bytes 128–191).
MTP_KERNELS_HD inline void end_round(uint64_t acc[8], const uint64_t sum[8],
                                     const uint8_t* secret) {
  const uint8_t* key = secret + 192 - 64;
  for (int i = 0; i < 8; ++i) {
    uint64_t a = xorshift(acc[i] + sum[i], 47);
    a ^= read64(key + 8 * i);
    acc[i] = a * kP32_1;
  }
}

}  // namespace detail

/// Rounds of the long loop that round_sum/chain_rounds handle for an input of `len` > 240 bytes:
/// the complete 1 KiB rounds before the final partial one, (len − 1) / 1024.
MTP_KERNELS_HD inline uint64_t full_rounds(uint64_t len) { return (len - 1) / kRoundBytes; }

/// round_sum: the 8 lane sums one 1 KiB round at `in` adds before its scramble:
/// Σ over its 16 stripes of their accumulate contributions (mod 2^64).
MTP_KERNELS_HD inline void round_sum(const uint8_t* in, const uint8_t* secret, uint64_t sum[8]) {
  for (int i = 0; i < 8; ++i) sum[i] = 0;
  for (int s = 0; s < kStripesPerRound; ++s) {
    detail::add_stripe(sum, in + s * kStripeBytes, secret + 8 * s);
  }
}

/// chain_rounds: the accumulators after `rounds` complete rounds whose sums are sums[r][0..7]
/// (starting from XXH3's initial values): acc = scramble(acc + sum) per round, in order.
MTP_KERNELS_HD inline void chain_rounds(const uint64_t (*sums)[8], uint64_t rounds,
                                        const uint8_t* secret, uint64_t acc[8]) {
  const uint64_t init[8] = {detail::kP32_3, detail::kP64_1, detail::kP64_2, detail::kP64_3,
                            detail::kP64_4, detail::kP32_2, detail::kP64_5, detail::kP32_1};
  for (int i = 0; i < 8; ++i) acc[i] = init[i];
  for (uint64_t r = 0; r < rounds; ++r) detail::end_round(acc, sums[r], secret);
}

/// partial_stripes: how many stripes of the final partial round (after the full_rounds(len)
/// complete ones) an input of `len` > 240 bytes accumulates before its last stripe (0–15).
MTP_KERNELS_HD inline uint64_t partial_stripes(uint64_t len) {
  return (len - 1 - full_rounds(len) * kRoundBytes) / kStripeBytes;
}

/// finish_long_summed: finish_long with the final partial round's stripes already summed into
/// `partial` (the 8 lane sums of its partial_stripes(len) stripes, each at secret + 8·s, as
/// round_sum sums a complete round's): those sums, the last stripe (the last 64 bytes, with the
/// secret at offset 121) and the two merges. Sums are mod 2^64: the same bits as finish_long.
MTP_KERNELS_HD inline Hash128 finish_long_summed(const uint8_t* in, uint64_t len,
                                                 const uint8_t* secret, uint64_t acc[8],
                                                 const uint64_t partial[8]) {
  for (int i = 0; i < 8; ++i) acc[i] += partial[i];
  detail::add_stripe(acc, in + len - kStripeBytes, secret + kSecretSize - kStripeBytes - 7);
  Hash128 h;
  h.low = detail::merge_accs(acc, secret + 11, len * detail::kP64_1);
  h.high = detail::merge_accs(acc, secret + kSecretSize - 64 - 11, ~(len * detail::kP64_2));
  return h;
}

/// finish_long: the hash of an input of `len` > 240 bytes from the accumulators after its
/// complete rounds (chain_rounds): the final partial round's stripes (one at a time), then
/// finish_long_summed.
MTP_KERNELS_HD inline Hash128 finish_long(const uint8_t* in, uint64_t len, const uint8_t* secret,
                                          uint64_t acc[8]) {
  const uint64_t done = full_rounds(len) * kRoundBytes;
  uint64_t partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (uint64_t s = 0; s < partial_stripes(len); ++s) {
    detail::add_stripe(partial, in + done + s * kStripeBytes, secret + 8 * s);
  }
  return finish_long_summed(in, len, secret, acc, partial);
}

/// hash128: XXH3-128 of `len` bytes at `in` with seed 0 and `secret` = kDefaultSecret (192
/// bytes), as libxxhash's XXH3_128bits. One thread; the long loop one round at a time.
MTP_KERNELS_HD inline Hash128 hash128(const uint8_t* in, uint64_t len, const uint8_t* secret) {
  if (len <= 16) return detail::hash_0to16(in, len, secret);
  if (len <= 128) return detail::hash_17to128(in, len, secret);
  if (len <= kMidSizeMax) return detail::hash_129to240(in, len, secret);
  uint64_t acc[8];
  chain_rounds(nullptr, 0, secret, acc);
  const uint64_t rounds = full_rounds(len);
  for (uint64_t r = 0; r < rounds; ++r) {
    uint64_t sum[8];
    round_sum(in + r * kRoundBytes, secret, sum);
    detail::end_round(acc, sum, secret);
  }
  return finish_long(in, len, secret, acc);
}

}  // namespace mtp::kernels::xxh3
