// File: kernels/cuda/accumulate.cu
//
// The main-grad accumulation on the GPU: main += float(grad) for an fp32 main grad and a bf16
// grad (Megatron's DDP hook: param.main_grad.add_(param.grad)), 8 elements per thread in 16-byte
// loads where the pointers allow. Each element is LibTorch's add_ of a bf16 tensor into an fp32
// one (a + 1·b in float: b widened exactly, one rounding), so the bits are at::add_'s; LibTorch
// runs that mixed-dtype add as an unrolled, unvectorized kernel (8.6 ms of the small model's
// 100 ms graphed step on the H100, 2026-12-07 profile).
#include "kernels/cuda/device_reduce.cuh"
#include "kernels/cuda/kernels_cuda.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mtp::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;                  // bf16 elements in 16 bytes
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride cap

struct alignas(16) Bf16x8 {
  Bf16 v[kVec];
};
struct alignas(16) F32x4 {
  float v[4];
};

__global__ void __launch_bounds__(kThreads)
    accumulate_vec_kernel(float* main, const Bf16* grad, int64_t vectors) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Bf16x8 g = reinterpret_cast<const Bf16x8*>(grad)[i];
    F32x4* m = reinterpret_cast<F32x4*>(main) + 2 * i;
    F32x4 lo = m[0], hi = m[1];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      lo.v[k] = lo.v[k] + load_acc(g.v[k]);
      hi.v[k] = hi.v[k] + load_acc(g.v[4 + k]);
    }
    m[0] = lo;
    m[1] = hi;
  }
}

__global__ void __launch_bounds__(kThreads)
    accumulate_kernel(float* main, const Bf16* grad, int64_t begin, int64_t n) {
  for (int64_t i = begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    main[i] = main[i] + load_acc(grad[i]);
  }
}

}  // namespace

void accumulate_bf16_into_fp32(float* main, const Bf16* grad, int64_t n, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (main == nullptr || grad == nullptr))) {
    throw std::invalid_argument("cuda::accumulate_bf16_into_fp32: n = " + std::to_string(n) +
                                " with null pointers or negative");
  }
  if (n == 0) return;
  const bool aligned =
      reinterpret_cast<uintptr_t>(main) % 16 == 0 && reinterpret_cast<uintptr_t>(grad) % 16 == 0;
  const int64_t vectors = aligned ? n / kVec : 0;
  if (vectors > 0) {
    accumulate_vec_kernel<<<detail::grid_blocks(vectors, kThreads, kMaxBlocks), kThreads, 0,
                            stream>>>(main, grad, vectors);
    MTP_CUDA_CHECK(cudaGetLastError());
  }
  const int64_t rest = n - vectors * kVec;
  if (rest > 0) {
    accumulate_kernel<<<detail::grid_blocks(rest, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
        main, grad, vectors * kVec, n);
    MTP_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace mtp::kernels::cuda
