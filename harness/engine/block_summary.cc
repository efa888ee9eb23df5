#include "harness/engine/block_summary.h"

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp::engine {

BlockSummary decode_block_summaries(const at::Tensor& host_rows, int element_size) {
  MTP_INTERNAL_ASSERT(host_rows.device().is_cpu() && host_rows.scalar_type() == at::kLong &&
                          host_rows.dim() == 2 && host_rows.size(1) == 5 &&
                          host_rows.is_contiguous(),
                      fmt::format("block summaries of shape {} ({}), not int64 [blocks, 5] on the "
                                  "host",
                                  c10::str(host_rows.sizes()), c10::str(host_rows.scalar_type())));
  MTP_INTERNAL_ASSERT(
      element_size == 1 || element_size == 2 || element_size == 4 || element_size == 8,
      fmt::format("block summaries of {}-byte elements", element_size));
  const int64_t blocks = host_rows.size(0);
  const int64_t* rows = host_rows.data_ptr<int64_t>();
  const uint64_t mask = element_size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * element_size)) - 1;
  BlockSummary out;
  out.digest.blocks.reserve(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t* r = rows + 5 * b;
    out.digest.blocks.push_back(
        record::Digest128{static_cast<uint64_t>(r[0]), static_cast<uint64_t>(r[1])});
    if (r[2] > 0 && out.nonfinite.count == 0) {
      out.nonfinite.first_index = r[3];
      out.nonfinite.first_bits = static_cast<uint64_t>(r[4]) & mask;
    }
    out.nonfinite.count += r[2];
  }
  out.digest.whole = record::combine_block_digests(out.digest.blocks);
  return out;
}

}  // namespace mtp::engine
