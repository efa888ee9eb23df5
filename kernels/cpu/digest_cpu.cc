// Block digests of a byte buffer on the CPU (kernels_cpu.h), with kernels/xxh3.h's one-thread
// XXH3-128.
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/internal/arg_checks.h"
#include "kernels/xxh3.h"

namespace mtp::kernels::cpu {

void block_digests(const void* data, uint64_t nbytes, uint64_t block_bytes, uint64_t* out,
                   uint64_t out_stride) {
  if (!internal::check_block_digests("block_digests", data, nbytes, block_bytes, out, out_stride)) {
    return;
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  const uint64_t blocks = (nbytes + block_bytes - 1) / block_bytes;
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t begin = b * block_bytes;
    const uint64_t len = nbytes - begin < block_bytes ? nbytes - begin : block_bytes;
    const xxh3::Hash128 h = xxh3::hash128(bytes + begin, len, xxh3::kDefaultSecret);
    out[out_stride * b] = h.high;
    out[out_stride * b + 1] = h.low;
  }
}

}  // namespace mtp::kernels::cpu
