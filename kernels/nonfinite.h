// File: kernels/nonfinite.h
//
// Non-finite elements found by their bits, on the host and the device alike: an IEEE element is
// ±inf or NaN exactly when its exponent field is all ones (harness/record/finite.h reads
// records the same way). Used by the block summaries of digest-only records (kernels/ops.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/numerics.h"

namespace mtp::kernels {

/// The exponent field of the floating formats, by element bytes and kind; an element is non-finite
/// when all of these bits are set. 0 stands for a dtype without non-finite values (integers).
inline constexpr uint64_t kExponentBitsF16 = 0x7c00;
inline constexpr uint64_t kExponentBitsBf16 = 0x7f80;
inline constexpr uint64_t kExponentBitsF32 = 0x7f800000;
inline constexpr uint64_t kExponentBitsF64 = 0x7ff0000000000000ULL;

/// element_bits: element i's bit pattern, zero-extended, of a buffer of `element_size`-byte
/// elements (1, 2, 4 or 8; `data` aligned to it).
MTP_KERNELS_HD inline uint64_t element_bits(const void* data, int64_t i, int element_size) {
#if defined(__CUDA_ARCH__)
  switch (element_size) {
    case 1:
      return static_cast<const uint8_t*>(data)[i];
    case 2:
      return static_cast<const uint16_t*>(data)[i];
    case 4:
      return static_cast<const uint32_t*>(data)[i];
    default:
      return static_cast<const uint64_t*>(data)[i];
  }
#else
  uint64_t bits = 0;  // little-endian: the element's bytes are the low ones
  std::memcpy(&bits, static_cast<const uint8_t*>(data) + i * element_size,
              static_cast<size_t>(element_size));
  return bits;
#endif
}

/// nonfinite_bits: whether bit pattern `bits` has every bit of `exponent_bits` set (false when
/// exponent_bits is 0).
MTP_KERNELS_HD inline bool nonfinite_bits(uint64_t bits, uint64_t exponent_bits) {
  return exponent_bits != 0 && (bits & exponent_bits) == exponent_bits;
}

}  // namespace mtp::kernels
