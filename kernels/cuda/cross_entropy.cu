// File: kernels/cuda/cross_entropy.cu
//
// Masked cross entropy forward and backward on the GPU, in the order of
// kernels/cpu/cross_entropy_cpu.cc (kernels_cuda.h).
#include "kernels/cuda/device_reduce.cuh"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cuda {
namespace {

using detail::block_tree_reduce;
using detail::grid_blocks;
using detail::MaxNanOp;
using detail::SumOp;

constexpr int64_t kMaxRowBlocks = 1 << 20;  // grid-stride cap, one block per row
constexpr int kElementThreads = 256;        // backward: a row over grid x, its columns over y

/// One block of kRowLanes threads per row: lane max (from l_0), tree; lane Σexp, tree; thread 0
/// writes the loss and the row statistics.
template <typename T>
__global__ void __launch_bounds__(kRowLanes)
    cross_entropy_forward_kernel(const T* logits, const int64_t* labels, const Acc<T>* mask,
                                 int64_t rows, int64_t vocab, Acc<T>* loss, Acc<T>* row_max,
                                 Acc<T>* row_sum) {
  using A = Acc<T>;
  __shared__ A buf[kRowLanes];
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const T* lr = logits + n * vocab;
    A lane = load_acc(lr[0]);
    for (int64_t j = tid; j < vocab; j += kRowLanes) {
      lane = max_nan(lane, load_acc(lr[j]));
    }
    const A mx = block_tree_reduce(lane, buf, MaxNanOp{});
    lane = A(0);
    for (int64_t j = tid; j < vocab; j += kRowLanes) {
      lane = lane + exp_acc(load_acc(lr[j]) - mx);
    }
    const A sum = block_tree_reduce(lane, buf, SumOp{});
    if (tid == 0) {
      const int64_t label = labels[n];
      const A m = mask != nullptr ? mask[n] : A(1);
      loss[n] = (label < 0 || label >= vocab) ? quiet_nan<A>()
                                              : (log_acc(sum) - (load_acc(lr[label]) - mx)) * m;
      if (row_max != nullptr) {
        row_max[n] = mx;
      }
      if (row_sum != nullptr) {
        row_sum[n] = sum;
      }
    }
  }
}

/// One thread per element: (exp(l − M)/S − [j = label])·(grad_loss·mask).
template <typename T>
__global__ void cross_entropy_backward_kernel(const T* logits, const int64_t* labels,
                                              const Acc<T>* mask, const Acc<T>* grad_loss,
                                              const Acc<T>* row_max, const Acc<T>* row_sum,
                                              int64_t rows, int64_t vocab, T* grad_logits) {
  using A = Acc<T>;
  const int64_t col_stride = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const int64_t label = labels[n];
    const bool bad = label < 0 || label >= vocab;
    const A coef = grad_loss[n] * (mask != nullptr ? mask[n] : A(1));
    const A mx = row_max[n], sum = row_sum[n];
    const T* lr = logits + n * vocab;
    T* gr = grad_logits + n * vocab;
    for (int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; j < vocab;
         j += col_stride) {
      const A p = exp_acc(load_acc(lr[j]) - mx) / sum;
      const A g = bad ? quiet_nan<A>() : (j == label ? p - A(1) : p) * coef;
      gr[j] = store_as<T>(g);
    }
  }
}

}  // namespace

template <typename T>
void cross_entropy_forward(const T* logits, const int64_t* labels, const Acc<T>* mask, int64_t rows,
                           int64_t vocab, Acc<T>* loss, Acc<T>* row_max, Acc<T>* row_sum,
                           cudaStream_t stream) {
  constexpr const char* kFn = "cuda::cross_entropy_forward";
  internal::check_cross_entropy_forward(kFn, logits, labels, loss, rows, vocab);
  if (rows == 0) {
    return;
  }
  cross_entropy_forward_kernel<T><<<grid_blocks(rows, 1, kMaxRowBlocks), kRowLanes, 0, stream>>>(
      logits, labels, mask, rows, vocab, loss, row_max, row_sum);
  MTP_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void cross_entropy_backward(const T* logits, const int64_t* labels, const Acc<T>* mask,
                            const Acc<T>* grad_loss, const Acc<T>* row_max, const Acc<T>* row_sum,
                            int64_t rows, int64_t vocab, T* grad_logits, cudaStream_t stream) {
  constexpr const char* kFn = "cuda::cross_entropy_backward";
  const bool any = internal::check_cross_entropy_backward(kFn, logits, labels, grad_loss, row_max,
                                                          row_sum, grad_logits, rows, vocab);
  if (!any) {
    return;
  }
  if (rows > INT64_MAX / vocab) {
    throw std::invalid_argument(std::string(kFn) + ": rows × vocab overflows int64");
  }
  cross_entropy_backward_kernel<T>
      <<<detail::row_column_grid(rows, vocab, kElementThreads, 8), kElementThreads, 0, stream>>>(
          logits, labels, mask, grad_loss, row_max, row_sum, rows, vocab, grad_logits);
  MTP_CUDA_CHECK(cudaGetLastError());
}

#define MTP_INSTANTIATE_CROSS_ENTROPY(T)                                                          \
  template void cross_entropy_forward<T>(const T*, const int64_t*, const Acc<T>*, int64_t,        \
                                         int64_t, Acc<T>*, Acc<T>*, Acc<T>*, cudaStream_t);       \
  template void cross_entropy_backward<T>(const T*, const int64_t*, const Acc<T>*, const Acc<T>*, \
                                          const Acc<T>*, const Acc<T>*, int64_t, int64_t, T*,     \
                                          cudaStream_t);
MTP_INSTANTIATE_CROSS_ENTROPY(float)
MTP_INSTANTIATE_CROSS_ENTROPY(double)
MTP_INSTANTIATE_CROSS_ENTROPY(Bf16)
#undef MTP_INSTANTIATE_CROSS_ENTROPY

}  // namespace mtp::kernels::cuda
