// File: kernels/cuda/kernels_cuda.h
//
// The CUDA path of the deterministic kernels: the same functions, types, shapes and reduction
// orders as kernels/cpu/kernels_cpu.h, on device pointers, launched on `stream` (asynchronous:
// nothing synchronises; errors of a launch surface as CudaError from MTP_CUDA_CHECK on the launch
// or on a later synchronising call). No atomics; every result is a function of the inputs alone,
// the same for any stream, device or run, and (fp32, bf16) the same bits as the CPU path, which
// kernels_cuda_test checks. Built for sm_90 with --fmad=false --prec-div=true --prec-sqrt=true
// --ftz=false (kernels/CMakeLists.txt).
//
// Ids and labels cannot be checked on the host without a synchronisation: an id outside [0, V)
// contributes to no row of the embedding gradient; a label outside [0, V) gives a NaN loss and a
// NaN gradient row. The CPU path throws std::out_of_range instead.
//
// Example:
//   size_t bytes = mtp::kernels::cuda::embedding_backward_workspace_bytes(T, V);
//   void* ws;  MTP_CUDA_CHECK(cudaMallocAsync(&ws, bytes, stream));
//   mtp::kernels::cuda::embedding_backward(d_grad, d_ids, T, H, V, d_table, ws, bytes, stream);
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/numerics.h"
#include "kernels/rope_math.h"

namespace mtp::kernels::cuda {

/// embedding_backward_workspace_bytes: device workspace embedding_backward needs for T tokens
/// and V rows (keys, positions and the radix sort's scratch). Throws std::invalid_argument for
/// T or V outside [0, 2^31 − 2].
size_t embedding_backward_workspace_bytes(int64_t num_tokens, int64_t vocab);

/// embedding_backward: grad_table [V, H] from grad_out [T, H] and ids [T] int64, as
/// cpu::embedding_backward: per row the contributions in ascending token position, Acc<T> from
/// +0, rounded to T; rows without tokens +0. A stable radix sort (CUB) of (clamped id, position)
/// pairs, then one thread per (row, column) sums its row's segment in order.
/// `workspace` ≥ embedding_backward_workspace_bytes(T, V) bytes, 256-byte aligned (cudaMalloc).
/// Throws std::invalid_argument (sizes, null pointers, small workspace), CudaError.
template <typename T>
void embedding_backward(const T* grad_out, const int64_t* ids, int64_t num_tokens, int64_t hidden,
                        int64_t vocab, T* grad_table, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream);

/// rms_norm_forward: y [N, H] and rstd [N] (may be null) from x [N, H], weight [H], as
/// cpu::rms_norm_forward; one block of kRowLanes threads per row.
/// Throws std::invalid_argument (sizes, null pointers), CudaError.
template <typename T>
void rms_norm_forward(const T* x, const T* weight, int64_t rows, int64_t hidden, double eps, T* y,
                      Acc<T>* rstd, cudaStream_t stream);

/// rms_norm_backward_workspace_bytes: device workspace of rms_norm_backward (the dweight block
/// partials, ceil(N / kRmsNormDwRowsPerBlock) × H Acc values).
size_t rms_norm_backward_workspace_bytes(int64_t rows, int64_t hidden, bool fp64);

/// rms_norm_backward: dx [N, H] (may be null) and dweight [H] (may be null) as
/// cpu::rms_norm_backward: dx one block of kRowLanes threads per row; dweight one thread per
/// (column, block of kRmsNormDwRowsPerBlock rows) into `workspace`, then one thread per column
/// over the block partials in ascending order. `workspace` ≥ rms_norm_backward_workspace_bytes
/// (may be null when dweight is). Throws std::invalid_argument, CudaError.
template <typename T>
void rms_norm_backward(const T* dy, const T* x, const T* weight, const Acc<T>* rstd, int64_t rows,
                       int64_t hidden, T* dx, T* dweight, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream);

/// cross_entropy_forward: loss [N] and optional row_max, row_sum [N] from logits [N, V],
/// labels [N], mask [N] (may be null), as cpu::cross_entropy_forward; one block of kRowLanes
/// threads per row. Throws std::invalid_argument, CudaError.
template <typename T>
void cross_entropy_forward(const T* logits, const int64_t* labels, const Acc<T>* mask, int64_t rows,
                           int64_t vocab, Acc<T>* loss, Acc<T>* row_max, Acc<T>* row_sum,
                           cudaStream_t stream);

/// cross_entropy_backward: grad_logits [N, V] as cpu::cross_entropy_backward; rows over the
/// grid's x, each row's elements over its y and the threads (detail::row_column_grid). Throws
/// std::invalid_argument, CudaError.
template <typename T>
void cross_entropy_backward(const T* logits, const int64_t* labels, const Acc<T>* mask,
                            const Acc<T>* grad_loss, const Acc<T>* row_max, const Acc<T>* row_sum,
                            int64_t rows, int64_t vocab, T* grad_logits, cudaStream_t stream);

/// block_digests: out [ceil(nbytes / block_bytes), 2] uint64 (device) from nbytes bytes at
/// `data` (device, any alignment; 8-byte aligned reads are single loads), as
/// cpu::block_digests: per block XXH3-128 (seed 0), high half then low. One block of 512 threads
/// per digest block: each warp sums whole 1 KiB rounds (coalesced 1 KiB loads, lane sums mod
/// 2^64 across the warp), then one thread chains the rounds' scrambles and finishes the hash.
/// Throws std::invalid_argument (block_bytes outside [1, 512 KiB], null pointers), CudaError.
/// `out_stride`: uint64 values from one block's pair to the next (2: packed).
void block_digests(const void* data, uint64_t nbytes, uint64_t block_bytes, uint64_t* out,
                   cudaStream_t stream, uint64_t out_stride = 2);

/// nonfinite_blocks: as cpu::nonfinite_blocks (device pointers): one block of 256 threads per
/// block of elements, each thread counting its elements in ascending order (16-byte vectors
/// where the block starts 16-byte aligned, vector k ≡ thread mod 256, then the tail's elements
/// i ≡ thread mod 256) and keeping its first; the counts summed and the firsts' minimum taken
/// by a tree in shared memory (integers: the order does not matter). Throws
/// std::invalid_argument, CudaError.
void nonfinite_blocks(const void* data, int64_t numel, int element_size, uint64_t exponent_bits,
                      int64_t block_elements, int64_t* out, int64_t out_stride,
                      cudaStream_t stream);

/// BlockSpan: one buffer of a batched block_summaries call.
struct BlockSpan {
  const void* data = nullptr;  ///< device, numel elements, aligned to element_size
  int64_t numel = 0;
  int element_size = 1;        ///< 1, 2, 4 or 8
  uint64_t exponent_bits = 0;  ///< the dtype's exponent field (kExponentBits*; 0: integers)
};

/// block_summaries: block_digests and nonfinite_blocks of `count` buffers in one pass each.
///   out  int64 [Σ ceil(numel_i / block_elements), 5] (device), span i's rows after span i − 1's:
///        per block of block_elements elements (the last of each span shorter) its digest
///        (block_digests with block_bytes = block_elements · element_size: high, low), then
///        nonfinite_blocks' count, first index within the span and bits; bitwise the values
///        of those functions called span by span
/// Two launches per 64 non-empty spans, whatever their sizes: the blocks of every span run side
/// by side (a digest record's ~100–200 tensors a step, most of them a few blocks, each paid one
/// latency-bound launch pair before). block_elements · element_size ≤ 512 KiB.
/// Throws std::invalid_argument (bad sizes, null pointers), CudaError.
void block_summaries(const BlockSpan* spans, int count, int64_t block_elements, int64_t* out,
                     cudaStream_t stream);

/// rope_forward / rope_backward: as cpu::rope_forward / cpu::rope_backward (device pointers),
/// a warp per row of D elements (grid-stride over rows), no reductions.
/// Throws std::invalid_argument (negative sizes, odd D, null pointers), CudaError.
template <typename T>
void rope_forward(const T* x, const RopeDims& dims, const T* cos, const T* sin, T* y,
                  cudaStream_t stream);
template <typename T>
void rope_backward(const T* grad, const RopeDims& dims, const T* cos, const T* sin, T* dx,
                   cudaStream_t stream);

/// swiglu_forward: y [rows, f] = silu(gate) · up of gate_up [rows, 2f] (each row gate then up;
/// contiguous device pointers), LibTorch's CUDA composite replayed op for op (swiglu.cu).
/// swiglu_backward: d_gate_up [rows, 2f] from the output gradient dy [rows, f], the composite's
/// autograd. Rows over the grid's x, the f columns over its y and the threads, no reductions.
/// Throws std::invalid_argument (negative sizes, null pointers), CudaError.
template <typename T>
void swiglu_forward(const T* gate_up, int64_t rows, int64_t f, T* y, cudaStream_t stream);
template <typename T>
void swiglu_backward(const T* dy, const T* gate_up, int64_t rows, int64_t f, T* d_gate_up,
                     cudaStream_t stream);

/// accumulate_bf16_into_fp32: main[i] = main[i] + float(grad[i]) for i < n (device pointers;
/// at::add_'s bits), 16-byte loads where both pointers are 16-byte aligned (accumulate.cu).
/// Throws std::invalid_argument (negative n, null pointers), CudaError.
void accumulate_bf16_into_fp32(float* main, const Bf16* grad, int64_t n, cudaStream_t stream);

/// attention_forward / attention_backward: as cpu::attention_forward / cpu::attention_backward
/// (device pointers; the same bits for fp32 and bf16), one block per (sample, head) pair.
template <typename T>
void attention_forward(const AttentionForwardBuffers<T>& b, const AttentionDims& dims, double scale,
                       cudaStream_t stream);
template <typename T>
void attention_backward(const AttentionBackwardBuffers<T>& b, const AttentionDims& dims,
                        double scale, cudaStream_t stream);

}  // namespace mtp::kernels::cuda
