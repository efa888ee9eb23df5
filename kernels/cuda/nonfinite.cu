// File: kernels/cuda/nonfinite.cu
//
// Non-finite elements per block of a device buffer (kernels_cuda.h), by their bits
// (kernels/nonfinite.h): with the block digests, what a digest-only record keeps of a tensor.
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/internal/arg_checks.h"
#include "kernels/nonfinite.h"

namespace mtp::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    nonfinite_blocks_kernel(const void* data, int64_t numel, int element_size,
                            uint64_t exponent_bits, int64_t block_elements, int64_t* out,
                            int64_t out_stride) {
  __shared__ int64_t counts[kThreads];
  __shared__ int64_t firsts[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t b = blockIdx.x;
  const int64_t begin = b * block_elements;
  const int64_t end = numel - begin < block_elements ? numel : begin + block_elements;
  int64_t count = 0, first = INT64_MAX;
  if (exponent_bits != 0) {
    for (int64_t i = begin + tid; i < end; i += kThreads) {
      if (nonfinite_bits(element_bits(data, i, element_size), exponent_bits)) {
        if (count == 0) first = i;  // ascending i: the thread's first is its smallest
        ++count;
      }
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
    out[b * out_stride] = counts[0];
    out[b * out_stride + 1] = any ? firsts[0] : -1;
    out[b * out_stride + 2] =
        any ? static_cast<int64_t>(element_bits(data, firsts[0], element_size)) : 0;
  }
}

}  // namespace

void nonfinite_blocks(const void* data, int64_t numel, int element_size, uint64_t exponent_bits,
                      int64_t block_elements, int64_t* out, int64_t out_stride,
                      cudaStream_t stream) {
  if (!internal::check_nonfinite_blocks("cuda::nonfinite_blocks", data, numel, element_size,
                                        block_elements, out, out_stride)) {
    return;
  }
  const int64_t blocks = (numel + block_elements - 1) / block_elements;
  if (blocks > 0x7fffffffLL) {
    throw std::invalid_argument("cuda::nonfinite_blocks: " + std::to_string(blocks) +
                                " blocks exceed one launch's grid");
  }
  nonfinite_blocks_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      data, numel, element_size, exponent_bits, block_elements, out, out_stride);
  MTP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mtp::kernels::cuda
