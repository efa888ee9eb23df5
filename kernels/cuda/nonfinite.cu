// File: kernels/cuda/nonfinite.cu
//
// Non-finite elements per block of a device buffer (kernels_cuda.h), by their bits
// (kernels/nonfinite.h): with the block digests, what a digest-only record keeps of a tensor.
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cuda/span_table.cuh"
#include "kernels/internal/arg_checks.h"
#include "kernels/nonfinite.h"

namespace mtp::kernels::cuda {
namespace {

constexpr int kThreads = 256;

/// Thread block b scans its block of span t.span_of(b) into row t.base + b (span_table.cuh);
/// indices are within the span.
__global__ void __launch_bounds__(kThreads)
    nonfinite_blocks_kernel(const __grid_constant__ detail::SpanTable t, int64_t* out,
                            int64_t out_stride) {
  __shared__ int64_t counts[kThreads];
  __shared__ int64_t firsts[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int span = t.span_of(blockIdx.x);
  const auto row = static_cast<int64_t>(t.base + blockIdx.x);
  const int element_size = t.element_size[span];
  const uint8_t* data = t.data[span];
  const uint64_t exponent_bits = t.exponent_bits[span];
  const auto numel = static_cast<int64_t>(t.nbytes[span] / static_cast<uint64_t>(element_size));
  const auto block_elements = static_cast<int64_t>(t.block_elements);
  const int64_t begin = (row - static_cast<int64_t>(t.first_block[span])) * block_elements;
  const int64_t end = numel - begin < block_elements ? numel : begin + block_elements;
  int64_t count = 0, first = INT64_MAX;
  auto visit = [&](int64_t i, uint64_t bits) {
    if (nonfinite_bits(bits, exponent_bits)) {
      if (count == 0) first = i;  // ascending i: the thread's first is its smallest
      ++count;
    }
  };
  if (exponent_bits != 0) {
    // 16-byte loads where the block starts 16-byte aligned: thread tid takes vectors tid,
    // tid + kThreads, …, then the elements after the last whole vector one by one, so that
    // each thread still sees its elements in ascending order.
    int64_t scalar_from = begin;
    const bool aligned = (reinterpret_cast<uintptr_t>(data + begin * element_size) & 15) == 0;
    if (aligned) {
      const int per_vector = 16 / element_size;
      const int64_t vectors = (end - begin) / per_vector;
      const uint64_t mask =
          element_size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * element_size)) - 1;
      const auto* v = reinterpret_cast<const ulonglong2*>(data + begin * element_size);
      for (int64_t k = tid; k < vectors; k += kThreads) {
        const ulonglong2 w = v[k];
        for (int e = 0; e < per_vector; ++e) {
          const int byte = e * element_size;
          const uint64_t word = byte < 8 ? w.x : w.y;
          visit(begin + k * per_vector + e, (word >> (8 * (byte % 8))) & mask);
        }
      }
      scalar_from = begin + vectors * per_vector;
    }
    for (int64_t i = scalar_from + tid; i < end; i += kThreads) {
      visit(i, element_bits(data, i, element_size));
    }
  }
  counts[tid] = count;
  firsts[tid] = first;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (tid < s) {
      counts[tid] += counts[tid + s];
      firsts[tid] = firsts[tid + s] < firsts[tid] ? firsts[tid + s] : firsts[tid];
    }
    __syncthreads();
  }
  if (tid == 0) {
    const bool any = counts[0] > 0;
    out[row * out_stride] = counts[0];
    out[row * out_stride + 1] = any ? firsts[0] : -1;
    out[row * out_stride + 2] =
        any ? static_cast<int64_t>(element_bits(data, firsts[0], element_size)) : 0;
  }
}

}  // namespace

void detail::launch_nonfinite(const BlockSpan* spans, int count, uint64_t block_elements,
                              int64_t* out, int64_t out_stride, cudaStream_t stream,
                              const char* fn) {
  detail::for_each_launch(
      spans, count, block_elements, fn, [&](const detail::SpanTable& table, unsigned blocks) {
        nonfinite_blocks_kernel<<<blocks, kThreads, 0, stream>>>(table, out, out_stride);
        MTP_CUDA_CHECK(cudaGetLastError());
      });
}

void nonfinite_blocks(const void* data, int64_t numel, int element_size, uint64_t exponent_bits,
                      int64_t block_elements, int64_t* out, int64_t out_stride,
                      cudaStream_t stream) {
  if (!internal::check_nonfinite_blocks("cuda::nonfinite_blocks", data, numel, element_size,
                                        block_elements, out, out_stride)) {
    return;
  }
  const BlockSpan span{data, numel, element_size, exponent_bits};
  detail::launch_nonfinite(&span, 1, static_cast<uint64_t>(block_elements), out, out_stride, stream,
                           "cuda::nonfinite_blocks");
}

}  // namespace mtp::kernels::cuda
