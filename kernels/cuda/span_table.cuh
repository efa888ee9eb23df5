// File: kernels/cuda/span_table.cuh
//
// The buffers of one batched launch of the block kernels (digest.cu, nonfinite.cu), passed by
// value as a kernel parameter: a record digests a step's ~100–200 tensors, most of them small,
// and one launch for all of them replaces one latency-bound launch per tensor.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/kernels_cuda.h"

namespace mtp::kernels::cuda::detail {

/// SpanTable: up to kMax buffers, cut into blocks of block_elements elements each (the last of
/// each buffer shorter). Thread block b of the launch takes block b − (first_block[j] − base)
/// of span j, the last span whose first_block is ≤ base + b; its outputs go to row base + b.
/// No span is empty. 2.3 KB: within the 4 KiB of kernel parameters every sm_90 toolkit takes.
struct SpanTable {
  static constexpr int kMax = 64;
  const uint8_t* data[kMax];
  uint64_t nbytes[kMax];
  uint64_t first_block[kMax];  ///< the span's first block in the whole batch (its first row)
  uint64_t exponent_bits[kMax];
  int element_size[kMax];
  int count;
  uint64_t block_elements;
  uint64_t base;  ///< first_block[0]: the launch's first row

  /// span_of: the span holding the launch's thread block b (a binary search of first_block).
  __device__ int span_of(uint64_t b) const {
    const uint64_t row = base + b;
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (first_block[mid] <= row) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }
};

/// for_each_launch: the non-empty spans in order, kMax at a time, as SpanTables with their
/// thread-block counts: launch(table, blocks) is called once per table. Throws
/// std::invalid_argument when a launch's blocks exceed one grid (2^31 − 1).
template <typename Launch>
void for_each_launch(const BlockSpan* spans, int count, uint64_t block_elements, const char* fn,
                     Launch&& launch) {
  SpanTable table{};
  table.block_elements = block_elements;
  uint64_t row = 0, blocks = 0;
  auto flush = [&] {
    if (table.count == 0) return;
    if (blocks > 0x7fffffffULL) {
      throw std::invalid_argument(std::string(fn) + ": " + std::to_string(blocks) +
                                  " blocks exceed one launch's grid");
    }
    launch(table, static_cast<unsigned>(blocks));
    table.count = 0;
    blocks = 0;
  };
  for (int i = 0; i < count; ++i) {
    const BlockSpan& s = spans[i];
    if (s.numel == 0) continue;
    if (table.count == SpanTable::kMax) flush();
    const int j = table.count++;
    const uint64_t n = static_cast<uint64_t>(s.numel);
    const uint64_t span_blocks = (n + block_elements - 1) / block_elements;
    table.data[j] = static_cast<const uint8_t*>(s.data);
    table.nbytes[j] = n * static_cast<uint64_t>(s.element_size);
    table.first_block[j] = row;
    table.exponent_bits[j] = s.exponent_bits;
    table.element_size[j] = s.element_size;
    if (j == 0) table.base = row;
    row += span_blocks;
    blocks += span_blocks;
  }
  flush();
}

/// launch_digests (digest.cu): the block digests of every span, row r's high and low halves at
/// out[out_stride · r] and out[out_stride · r + 1]; block_bytes = block_elements · element_size.
void launch_digests(const BlockSpan* spans, int count, uint64_t block_elements, uint64_t* out,
                    uint64_t out_stride, cudaStream_t stream, const char* fn);

/// launch_nonfinite (nonfinite.cu): nonfinite_blocks of every span, row r's count, first index
/// (within its span) and bits at out[out_stride · r + 0, 1, 2].
void launch_nonfinite(const BlockSpan* spans, int count, uint64_t block_elements, int64_t* out,
                      int64_t out_stride, cudaStream_t stream, const char* fn);

}  // namespace mtp::kernels::cuda::detail
