// File: kernels/cuda/attention.cu
//
// The harness's causal attention on the GPU (kernels_cuda.h): one block per (sample, head) pair,
// kernels/attention_math.h's phases separated by __syncthreads, each element computed by one
// thread with the shared element functions (the CPU path's bits). The scratch lives in global
// memory (L2-resident at the short sequences this is for); a block's writes are visible to its
// own threads after the barrier. No atomics, no shared reductions. A block striding over several
// pairs needs no barrier between them: each pair has its own scratch and outputs.
#include "kernels/cuda/device_reduce.cuh"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cuda {
namespace {

using detail::grid_blocks;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;  // pairs beyond it: the grid strides

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(AttentionForwardBuffers<T> b, AttentionDims dims, Acc<T> scale) {
  const int64_t s = dims.s, hn = dims.hn;
  for (int64_t p = blockIdx.x; p < dims.n; p += gridDim.x) {
    const AttentionForwardBuffers<T> x = b.pair(dims, p);
    for (int64_t e = threadIdx.x; e < s * s; e += blockDim.x) {
      const int64_t i = e / s, j = e % s;
      if (j <= i) x.probs[e] = attention_dot(x.q + i * hn, x.k + j * hn, hn) * scale;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < s; i += blockDim.x) {
      x.lse[i] = attention_softmax_row(x.probs + i * s, i + 1);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < s * hn; e += blockDim.x) {
      const int64_t i = e / hn, d = e % hn;
      x.o[e] = attention_output_element(x.probs + i * s, x.v, i, d, hn);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attention_backward_kernel(AttentionBackwardBuffers<T> b, AttentionDims dims, Acc<T> scale) {
  const int64_t s = dims.s, hn = dims.hn;
  for (int64_t p = blockIdx.x; p < dims.n; p += gridDim.x) {
    const AttentionBackwardBuffers<T> x = b.pair(dims, p);
    for (int64_t e = threadIdx.x; e < s * s; e += blockDim.x) {
      const int64_t i = e / s, j = e % s;
      if (j <= i) {
        x.probs[e] = exp_acc(attention_dot(x.q + i * hn, x.k + j * hn, hn) * scale - x.lse[i]);
        x.ds[e] = attention_dot(x.d_o + i * hn, x.v + j * hn, hn);
      }
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < s; i += blockDim.x) {
      x.delta[i] = attention_ds_row(x.probs + i * s, x.ds + i * s, i + 1);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < 3 * s * hn; e += blockDim.x) {
      const int64_t which = e / (s * hn), f = e % (s * hn);
      const int64_t r = f / hn, d = f % hn;
      if (which == 0) {
        x.dq[f] = attention_dq_element(x.ds, x.k, r, d, s, hn, scale);
      } else if (which == 1) {
        x.dk[f] = attention_column_element(x.ds, x.q, r, d, s, hn, scale);
      } else {
        x.dv[f] = attention_column_element(x.probs, x.d_o, r, d, s, hn, Acc<T>(1));
      }
    }
  }
}

}  // namespace

template <typename T>
void attention_forward(const AttentionForwardBuffers<T>& b, const AttentionDims& dims, double scale,
                       cudaStream_t stream) {
  if (!internal::check_attention("cuda::attention_forward", b, dims.n, dims.s, dims.hn, scale)) {
    return;
  }
  attention_forward_kernel<T><<<grid_blocks(dims.n, 1, kMaxBlocks), kThreads, 0, stream>>>(
      b, dims, static_cast<Acc<T>>(scale));
  MTP_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void attention_backward(const AttentionBackwardBuffers<T>& b, const AttentionDims& dims,
                        double scale, cudaStream_t stream) {
  if (!internal::check_attention("cuda::attention_backward", b, dims.n, dims.s, dims.hn, scale)) {
    return;
  }
  attention_backward_kernel<T><<<grid_blocks(dims.n, 1, kMaxBlocks), kThreads, 0, stream>>>(
      b, dims, static_cast<Acc<T>>(scale));
  MTP_CUDA_CHECK(cudaGetLastError());
}

#define MTP_INSTANTIATE_ATTENTION(T)                                                            \
  template void attention_forward<T>(const AttentionForwardBuffers<T>&, const AttentionDims&,   \
                                     double, cudaStream_t);                                     \
  template void attention_backward<T>(const AttentionBackwardBuffers<T>&, const AttentionDims&, \
                                      double, cudaStream_t);
MTP_INSTANTIATE_ATTENTION(float)
MTP_INSTANTIATE_ATTENTION(double)
MTP_INSTANTIATE_ATTENTION(Bf16)
#undef MTP_INSTANTIATE_ATTENTION

}  // namespace mtp::kernels::cuda
