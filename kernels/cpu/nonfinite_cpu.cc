// Non-finite elements per block of a buffer on the CPU (kernels_cpu.h), by their bits
// (kernels/nonfinite.h).
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/internal/arg_checks.h"
#include "kernels/nonfinite.h"

namespace mtp::kernels::cpu {

void nonfinite_blocks(const void* data, int64_t numel, int element_size, uint64_t exponent_bits,
                      int64_t block_elements, int64_t* out, int64_t out_stride) {
  if (!internal::check_nonfinite_blocks("nonfinite_blocks", data, numel, element_size,
                                        block_elements, out, out_stride)) {
    return;
  }
  const int64_t blocks = (numel + block_elements - 1) / block_elements;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * block_elements;
    const int64_t end = numel - begin < block_elements ? numel : begin + block_elements;
    int64_t count = 0, first = -1;
    uint64_t first_bits = 0;
    for (int64_t i = exponent_bits != 0 ? begin : end; i < end; ++i) {
      const uint64_t bits = element_bits(data, i, element_size);
      if (!nonfinite_bits(bits, exponent_bits)) continue;
      if (count++ == 0) {
        first = i;
        first_bits = bits;
      }
    }
    out[b * out_stride] = count;
    out[b * out_stride + 1] = first;
    out[b * out_stride + 2] = static_cast<int64_t>(first_bits);
  }
}

}  // namespace mtp::kernels::cpu
