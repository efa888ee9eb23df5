// File: kernels/cuda/rms_norm.cu
//
// RMSNorm forward and backward on the GPU, in the order of kernels/cpu/rms_norm_cpu.cc
// (kernels_cuda.h).
#include "kernels/cuda/device_reduce.cuh"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cuda {
namespace {

using detail::block_tree_reduce;
using detail::grid_blocks;
using detail::SumOp;

constexpr int64_t kMaxRowBlocks = 1 << 20;  // grid-stride cap for one-block-per-row kernels

/// One block of kRowLanes threads per row: lane sums of x², tree, r, then y.
template <typename T>
__global__ void __launch_bounds__(kRowLanes)
    rms_norm_forward_kernel(const T* x, const T* weight, int64_t rows, int64_t hidden, Acc<T> eps,
                            T* y, Acc<T>* rstd) {
  using A = Acc<T>;
  __shared__ A buf[kRowLanes];
  const int tid = static_cast<int>(threadIdx.x);
  const A h_a = static_cast<A>(hidden);
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const T* xr = x + n * hidden;
    A lane = A(0);
    for (int64_t j = tid; j < hidden; j += kRowLanes) {
      const A v = load_acc(xr[j]);
      lane = lane + v * v;
    }
    const A ss = block_tree_reduce(lane, buf, SumOp{});
    const A r = A(1) / sqrt_acc(ss / h_a + eps);
    if (tid == 0 && rstd != nullptr) {
      rstd[n] = r;
    }
    T* yr = y + n * hidden;
    for (int64_t j = tid; j < hidden; j += kRowLanes) {
      yr[j] = store_as<T>((load_acc(xr[j]) * r) * load_acc(weight[j]));
    }
  }
}

/// One block of kRowLanes threads per row: lane sums of g·x̂, tree, then dx.
template <typename T>
__global__ void __launch_bounds__(kRowLanes)
    rms_norm_dx_kernel(const T* dy, const T* x, const T* weight, const Acc<T>* rstd, int64_t rows,
                       int64_t hidden, T* dx) {
  using A = Acc<T>;
  __shared__ A buf[kRowLanes];
  const int tid = static_cast<int>(threadIdx.x);
  const A h_a = static_cast<A>(hidden);
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const T* xr = x + n * hidden;
    const T* dyr = dy + n * hidden;
    const A r = rstd[n];
    A lane = A(0);
    for (int64_t j = tid; j < hidden; j += kRowLanes) {
      const A xhat = load_acc(xr[j]) * r;
      const A g = load_acc(dyr[j]) * load_acc(weight[j]);
      lane = lane + g * xhat;
    }
    const A d = block_tree_reduce(lane, buf, SumOp{});
    const A m = d / h_a;
    T* dxr = dx + n * hidden;
    for (int64_t j = tid; j < hidden; j += kRowLanes) {
      const A xhat = load_acc(xr[j]) * r;
      const A g = load_acc(dyr[j]) * load_acc(weight[j]);
      dxr[j] = store_as<T>(r * (g - xhat * m));
    }
  }
}

/// One thread per (column j, row block b): partial[b, j] = Σ_{rows of b, ascending} dy·x̂.
template <typename T>
__global__ void rms_norm_dw_partial_kernel(const T* dy, const T* x, const Acc<T>* rstd,
                                           int64_t rows, int64_t hidden, Acc<T>* partial) {
  using A = Acc<T>;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= hidden) {
    return;
  }
  const int64_t num_blocks = (rows + kRmsNormDwRowsPerBlock - 1) / kRmsNormDwRowsPerBlock;
  for (int64_t b = blockIdx.y; b < num_blocks; b += gridDim.y) {
    const int64_t begin = b * kRmsNormDwRowsPerBlock;
    const int64_t end =
        rows - begin < kRmsNormDwRowsPerBlock ? rows : begin + kRmsNormDwRowsPerBlock;
    A acc = A(0);
    for (int64_t n = begin; n < end; ++n) {
      acc = acc + load_acc(dy[n * hidden + j]) * (load_acc(x[n * hidden + j]) * rstd[n]);
    }
    partial[b * hidden + j] = acc;
  }
}

/// One thread per column: dweight[j] = Σ_{b ascending} partial[b, j].
template <typename T>
__global__ void rms_norm_dw_final_kernel(const Acc<T>* partial, int64_t num_blocks, int64_t hidden,
                                         T* dweight) {
  using A = Acc<T>;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= hidden) {
    return;
  }
  A acc = A(0);
  for (int64_t b = 0; b < num_blocks; ++b) {
    acc = acc + partial[b * hidden + j];
  }
  dweight[j] = store_as<T>(acc);
}

}  // namespace

template <typename T>
void rms_norm_forward(const T* x, const T* weight, int64_t rows, int64_t hidden, double eps, T* y,
                      Acc<T>* rstd, cudaStream_t stream) {
  constexpr const char* kFn = "cuda::rms_norm_forward";
  internal::check_rms_norm_forward(kFn, x, weight, y, rows, hidden);
  if (rows == 0) {
    return;
  }
  // hidden = 0 still runs: rstd = 1/sqrt(0/0 + eps) = NaN, as on the CPU.
  rms_norm_forward_kernel<T><<<grid_blocks(rows, 1, kMaxRowBlocks), kRowLanes, 0, stream>>>(
      x, weight, rows, hidden, static_cast<Acc<T>>(eps), y, rstd);
  MTP_CUDA_CHECK(cudaGetLastError());
}

size_t rms_norm_backward_workspace_bytes(int64_t rows, int64_t hidden, bool fp64) {
  internal::require_size("cuda::rms_norm_backward_workspace_bytes", "rows", rows);
  internal::require_size("cuda::rms_norm_backward_workspace_bytes", "hidden", hidden);
  const int64_t num_blocks = (rows + kRmsNormDwRowsPerBlock - 1) / kRmsNormDwRowsPerBlock;
  return static_cast<size_t>(num_blocks) * static_cast<size_t>(hidden) *
         (fp64 ? sizeof(double) : sizeof(float));
}

template <typename T>
void rms_norm_backward(const T* dy, const T* x, const T* weight, const Acc<T>* rstd, int64_t rows,
                       int64_t hidden, T* dx, T* dweight, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream) {
  constexpr const char* kFn = "cuda::rms_norm_backward";
  const bool any = internal::check_rms_norm_backward(kFn, dy, x, weight, rstd, dx, rows, hidden);
  using A = Acc<T>;
  if (dx != nullptr && any) {
    rms_norm_dx_kernel<T><<<grid_blocks(rows, 1, kMaxRowBlocks), kRowLanes, 0, stream>>>(
        dy, x, weight, rstd, rows, hidden, dx);
    MTP_CUDA_CHECK(cudaGetLastError());
  }
  if (dweight != nullptr && hidden > 0) {
    const size_t need = rms_norm_backward_workspace_bytes(rows, hidden, sizeof(A) == 8);
    if (workspace_bytes < need || (need > 0 && workspace == nullptr)) {
      throw std::invalid_argument(std::string(kFn) + ": workspace of " +
                                  std::to_string(workspace_bytes) + " bytes, need " +
                                  std::to_string(need));
    }
    const int64_t num_blocks = (rows + kRmsNormDwRowsPerBlock - 1) / kRmsNormDwRowsPerBlock;
    A* partial = static_cast<A*>(workspace);
    constexpr int kThreads = 256;
    const unsigned col_blocks = grid_blocks(hidden, kThreads, INT32_MAX);
    if (num_blocks > 0) {
      const dim3 grid(col_blocks, grid_blocks(num_blocks, 1, 65535));
      rms_norm_dw_partial_kernel<T>
          <<<grid, kThreads, 0, stream>>>(dy, x, rstd, rows, hidden, partial);
      MTP_CUDA_CHECK(cudaGetLastError());
    }
    rms_norm_dw_final_kernel<T>
        <<<col_blocks, kThreads, 0, stream>>>(partial, num_blocks, hidden, dweight);
    MTP_CUDA_CHECK(cudaGetLastError());
  }
}

#define MTP_INSTANTIATE_RMS_NORM(T)                                                            \
  template void rms_norm_forward<T>(const T*, const T*, int64_t, int64_t, double, T*, Acc<T>*, \
                                    cudaStream_t);                                             \
  template void rms_norm_backward<T>(const T*, const T*, const T*, const Acc<T>*, int64_t,     \
                                     int64_t, T*, T*, void*, size_t, cudaStream_t);
MTP_INSTANTIATE_RMS_NORM(float)
MTP_INSTANTIATE_RMS_NORM(double)
MTP_INSTANTIATE_RMS_NORM(Bf16)
#undef MTP_INSTANTIATE_RMS_NORM

}  // namespace mtp::kernels::cuda
