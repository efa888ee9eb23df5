// File: kernels/cuda/swiglu.cu
//
// Fused SwiGLU activation on the GPU: silu(gate) · up forward and its gradient, rows over the
// grid's x and the f columns over its y and the threads, each element replaying LibTorch's CUDA
// composite operation for operation so that the fused op gives its bits (kernels/ops.h swiglu).
// The composite and the roundings it makes (R = the output dtype's rounding, A = the op-math type:
// float for bf16 and fp32, double for fp64):
//
//   forward    s = R(g / (1 + exp(−g)))                       at::silu (ActivationSiluKernel.cu)
//              y = R(s · u)                                   at::mul
//   backward   du = R(dy · s)                                 MulBackward0 (grad · self)
//              ds = R(dy · u)                                 MulBackward0 (grad · other)
//              σ  = 1 / (1 + exp(−g))
//              dg = R((ds · σ) · fma(g, 1 − σ, 1))            silu_backward: dy·σ·(1 + x·(1 − σ))
//   (chunk's backward concatenates [dg, du]; the fused backward writes them in place.)
//
// exp is CUDA's full-precision expf / exp (LibTorch builds without fast math). silu_backward's
// 1 + x·(1 − σ) is contracted into one fma by nvcc's default --fmad=true, with which LibTorch is
// built; this library is built with --fmad=false (kernels/CMakeLists.txt), so the fma is written
// out. Whether the bits agree is not assumed: KernelOpsCudaTest.SwigluIsBitwiseTheComposite_CUDA
// compares the fused op with the composite on the device, forward and backward, in each dtype.
// The CPU has no kernel here: LibTorch's CPU silu vectorises exp (Sleef), which this library
// cannot replay, so kernels::swiglu runs the composite itself on CPU tensors.
#include "kernels/cuda/device_reduce.cuh"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline float device_exp(float x) { return ::expf(x); }
__device__ inline double device_exp(double x) { return ::exp(x); }

/// silu(g) rounded to T, as at::silu stores it.
template <typename T>
__device__ inline T silu_rounded(Acc<T> g) {
  return store_as<T>(g / (Acc<T>(1) + device_exp(-g)));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    swiglu_forward_kernel(const T* gate_up, int64_t rows, int64_t f, T* y) {
  const int64_t col_stride = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = gate_up + r * 2 * f;
    T* y_row = y + r * f;
    for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < f;
         c += col_stride) {
      const T s = silu_rounded<T>(load_acc(row[c]));
      y_row[c] = store_as<T>(load_acc(s) * load_acc(row[f + c]));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    swiglu_backward_kernel(const T* dy, const T* gate_up, int64_t rows, int64_t f, T* d_gate_up) {
  using A = Acc<T>;
  const int64_t col_stride = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = gate_up + r * 2 * f;
    const T* dy_row = dy + r * f;
    T* d_row = d_gate_up + r * 2 * f;
    for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < f;
         c += col_stride) {
      const A g = load_acc(row[c]);
      const A grad = load_acc(dy_row[c]);
      const T s = silu_rounded<T>(g);
      d_row[f + c] = store_as<T>(grad * load_acc(s));
      const A ds = load_acc(store_as<T>(grad * load_acc(row[f + c])));
      const A sigma = A(1) / (A(1) + device_exp(-g));
      d_row[c] = store_as<T>(ds * sigma * fma(g, A(1) - sigma, A(1)));
    }
  }
}

}  // namespace

template <typename T>
void swiglu_forward(const T* gate_up, int64_t rows, int64_t f, T* y, cudaStream_t stream) {
  if (!internal::check_swiglu("cuda::swiglu_forward", gate_up, nullptr, y, rows, f, false)) return;
  swiglu_forward_kernel<T>
      <<<detail::row_column_grid(rows, f, kThreads, 2), kThreads, 0, stream>>>(gate_up, rows, f, y);
  MTP_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void swiglu_backward(const T* dy, const T* gate_up, int64_t rows, int64_t f, T* d_gate_up,
                     cudaStream_t stream) {
  if (!internal::check_swiglu("cuda::swiglu_backward", gate_up, dy, d_gate_up, rows, f, true))
    return;
  swiglu_backward_kernel<T><<<detail::row_column_grid(rows, f, kThreads, 2), kThreads, 0, stream>>>(
      dy, gate_up, rows, f, d_gate_up);
  MTP_CUDA_CHECK(cudaGetLastError());
}

#define MTP_INSTANTIATE_SWIGLU(T)                                                \
  template void swiglu_forward<T>(const T*, int64_t, int64_t, T*, cudaStream_t); \
  template void swiglu_backward<T>(const T*, const T*, int64_t, int64_t, T*, cudaStream_t);
MTP_INSTANTIATE_SWIGLU(float)
MTP_INSTANTIATE_SWIGLU(double)
MTP_INSTANTIATE_SWIGLU(Bf16)
#undef MTP_INSTANTIATE_SWIGLU

}  // namespace mtp::kernels::cuda
