// File: kernels/cuda/rope.cu
//
// Fused RoPE forward and backward on the GPU: a warp per row of D elements, the arithmetic of
// kernels/rope_math.h (bitwise the CPU path and the LibTorch composite).
#include "kernels/cuda/device_reduce.cuh"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cuda {
namespace {

using detail::grid_blocks;

constexpr int kThreads = 256;
constexpr int kRowThreads = 32;          // x: a row's elements; y: kThreads / 32 rows per block
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride cap

template <typename T, bool kBackward>
__global__ void __launch_bounds__(kThreads)
    rope_kernel(const T* in, RopeDims dims, const T* cos, const T* sin, T* out) {
  // A row is one (i, j, h): its offset is worked out once per row, its D elements taken by the
  // block's x threads (a flat index divided per element cost ~8x the memory time).
  const int64_t rows = dims.s * dims.b * dims.heads, half = dims.dim / 2;
  const int64_t rows_per_s = dims.b * dims.heads;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t i = r / rows_per_s;
    const T* row = in + dims.row_offset(r * dims.dim);
    const T* cs = cos + i * dims.dim;
    const T* sn = sin + i * dims.dim;
    T* out_row = out + r * dims.dim;
    for (int64_t d = threadIdx.x; d < dims.dim; d += blockDim.x) {
      out_row[d] = kBackward ? rope_backward_element(row, cs, sn, d, half)
                             : rope_forward_element(row, cs, sn, d, half);
    }
  }
}

template <typename T, bool kBackward>
void launch(const char* fn, const T* in, const RopeDims& dims, const T* cos, const T* sin, T* out,
            cudaStream_t stream) {
  if (!internal::check_rope(fn, in, cos, sin, out, dims.s, dims.b, dims.heads, dims.dim)) {
    return;
  }
  const dim3 block(kRowThreads, kThreads / kRowThreads);
  const int64_t rows = dims.s * dims.b * dims.heads;
  rope_kernel<T, kBackward>
      <<<grid_blocks(rows, block.y, kMaxBlocks), block, 0, stream>>>(in, dims, cos, sin, out);
  MTP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <typename T>
void rope_forward(const T* x, const RopeDims& dims, const T* cos, const T* sin, T* y,
                  cudaStream_t stream) {
  launch<T, false>("cuda::rope_forward", x, dims, cos, sin, y, stream);
}

template <typename T>
void rope_backward(const T* grad, const RopeDims& dims, const T* cos, const T* sin, T* dx,
                   cudaStream_t stream) {
  launch<T, true>("cuda::rope_backward", grad, dims, cos, sin, dx, stream);
}

#define MTP_INSTANTIATE_ROPE(T)                                                                   \
  template void rope_forward<T>(const T*, const RopeDims&, const T*, const T*, T*, cudaStream_t); \
  template void rope_backward<T>(const T*, const RopeDims&, const T*, const T*, T*, cudaStream_t);
MTP_INSTANTIATE_ROPE(float)
MTP_INSTANTIATE_ROPE(double)
MTP_INSTANTIATE_ROPE(Bf16)
#undef MTP_INSTANTIATE_ROPE

}  // namespace mtp::kernels::cuda
