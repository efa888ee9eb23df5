// File: kernels/cpu/kernels_cpu.h
//
// The CPU path of the deterministic kernels: raw pointers, row-major contiguous buffers, no
// LibTorch. Each function is a template over the input type T ∈ {float, double, Bf16}
// (explicitly instantiated in the .cc files); sums are carried in Acc<T> (fp32 for fp32 and bf16,
// fp64 for fp64) in the fixed orders of kernels/numerics.h, which the CUDA path
// (kernels/cuda/kernels_cuda.h) replays operation for operation. Outputs are fully overwritten.
// Invalid arguments throw std::invalid_argument, out-of-range ids or labels std::out_of_range,
// before any output is written.
//
// Example:
//   std::vector<float> y(rows * hidden), rstd(rows);
//   mtp::kernels::cpu::rms_norm_forward(x.data(), w.data(), rows, hidden, 1e-5, y.data(),
//                                       rstd.data());
#pragma once

#include <cstdint>

#include "kernels/attention_math.h"
#include "kernels/numerics.h"
#include "kernels/rope_math.h"

namespace mtp::kernels::cpu {

/// embedding_backward: the word-embedding weight gradient without atomics.
///   grad_out   [T, H] (T = num_tokens, H = hidden), type T
///   ids        [T] int64, each in [0, V)
///   grad_table [V, H] (V = vocab), type T, output
/// grad_table[v, :] = Σ grad_out[t, :] over the t with ids[t] = v, summed in Acc<T> from +0 in
/// ascending t: the order a stable sort of (id, t) gives, which defines the result on CPU and GPU
/// alike (here a stable counting sort). Rows no token hits are +0. T = 0 zeroes the table.
/// Throws std::invalid_argument (negative sizes, null pointers with nonzero sizes) and
/// std::out_of_range (an id outside [0, V)). Follows torch.nn.functional.embedding backward
/// (Megatron LanguageModelEmbedding, TP = 1) with a fixed summation order.
template <typename T>
void embedding_backward(const T* grad_out, const int64_t* ids, int64_t num_tokens, int64_t hidden,
                        int64_t vocab, T* grad_table);

/// rms_norm_forward: y = x · rsqrt(mean(x²) + eps) · w per row (megatron_conventions.md
/// "Arithmetic" 1; Megatron local RMSNorm).
///   x      [N, H] type T (N = rows, H = hidden); weight [H] type T
///   y      [N, H] type T, output
///   rstd   [N] Acc<T>, output, may be null: r = 1 / sqrt(Σx²/H + eps) per row, for the backward
/// Per row, in Acc<T>: s = Σ x_j·x_j in the kRowLanes order; r = 1 / sqrt(s / H + (Acc)eps);
/// y_j = (x_j·r)·w_j, rounded to T. Each row depends on that row only (batch invariant).
/// Throws std::invalid_argument (negative sizes, null pointers with nonzero sizes).
template <typename T>
void rms_norm_forward(const T* x, const T* weight, int64_t rows, int64_t hidden, double eps, T* y,
                      Acc<T>* rstd);

/// rms_norm_backward: the gradients of rms_norm_forward.
///   dy, x   [N, H] type T; weight [H] type T; rstd [N] Acc<T> from rms_norm_forward
///   dx      [N, H] type T, output, may be null
///   dweight [H] type T, output, may be null
/// Per row, in Acc<T>: x̂_j = x_j·r, g_j = dy_j·w_j, d = Σ g_j·x̂_j in the kRowLanes order,
/// m = d / H, dx_j = r·(g_j − x̂_j·m) (batch invariant). dweight_j = Σ_rows dy_j·x̂_j in two
/// levels: each block of kRmsNormDwRowsPerBlock consecutive rows summed in ascending row order
/// from +0, then the block partials summed in ascending block order from +0 (depends on all rows,
/// as it must; independent of threads). N = 0 gives dweight = 0.
/// Throws std::invalid_argument (negative sizes, null pointers with nonzero sizes).
template <typename T>
void rms_norm_backward(const T* dy, const T* x, const T* weight, const Acc<T>* rstd, int64_t rows,
                       int64_t hidden, T* dx, T* dweight);

/// cross_entropy_forward: masked cross entropy from logits, per row (megatron_conventions.md
/// "Arithmetic" 7; Megatron vocab_parallel_cross_entropy with TP = 1, in fp32 for bf16 logits).
///   logits [N, V] type T; labels [N] int64 in [0, V); mask [N] Acc<T>, may be null (= all 1)
///   loss   [N] Acc<T>, output: (ln Σ_j exp(l_j − M) − (l_label − M))·mask
///   row_max, row_sum [N] Acc<T>, outputs, may be null: M = max_j l_j and S = Σ_j exp(l_j − M),
///          for the backward
/// Per row, in Acc<T>: M by max_nan and S by + in the kRowLanes order; exp/log are exp_acc/log_acc.
/// Each row depends on that row only (batch invariant).
/// Throws std::invalid_argument (negative sizes, V = 0 with N > 0, null pointers) and
/// std::out_of_range (a label outside [0, V)).
template <typename T>
void cross_entropy_forward(const T* logits, const int64_t* labels, const Acc<T>* mask, int64_t rows,
                           int64_t vocab, Acc<T>* loss, Acc<T>* row_max, Acc<T>* row_sum);

/// cross_entropy_backward: d loss / d logits.
///   logits [N, V] type T; labels [N] int64; mask [N] Acc<T> or null; grad_loss [N] Acc<T>;
///   row_max, row_sum [N] Acc<T> from cross_entropy_forward
///   grad_logits [N, V] type T, output
/// grad_logits[t, j] = (exp(l_j − M)/S − [j = label])·(grad_loss_t·mask_t), in Acc<T>, rounded to
/// T (batch invariant: elementwise given the row's M and S).
/// Throws std::invalid_argument (negative sizes, null pointers) and std::out_of_range (labels).
template <typename T>
void cross_entropy_backward(const T* logits, const int64_t* labels, const Acc<T>* mask,
                            const Acc<T>* grad_loss, const Acc<T>* row_max, const Acc<T>* row_sum,
                            int64_t rows, int64_t vocab, T* grad_logits);

/// block_digests: the record digests' blocks (harness/record/digest.h) of a byte buffer.
///   data    nbytes bytes, any alignment
///   out     [ceil(nbytes / block_bytes), 2] uint64, output: per block of block_bytes bytes (the
///           last one shorter) XXH3-128 with seed 0, high half then low (kernels/xxh3.h; the
///           value libxxhash's XXH3_128bits gives)
/// Blocks are independent; each is hashed one 1 KiB round at a time. nbytes = 0 writes nothing.
/// Throws std::invalid_argument (block_bytes outside [1, 512 KiB], null pointers).
/// `out_stride`: uint64 values from one block's pair to the next (2: packed [blocks, 2]).
void block_digests(const void* data, uint64_t nbytes, uint64_t block_bytes, uint64_t* out,
                   uint64_t out_stride = 2);

/// nonfinite_blocks: the non-finite elements (kernels/nonfinite.h: exponent bits all ones) of
/// each block of a buffer.
///   data           numel elements of element_size bytes (1, 2, 4 or 8), aligned to it
///   exponent_bits  the dtype's exponent field (kExponentBits*; 0: no element is non-finite)
///   out            per block b of block_elements elements (the last one shorter), at
///                  out[b·out_stride + 0, 1, 2]: the count of non-finite elements, the index in
///                  data of the first one (−1: none) and its bits zero-extended (0: none)
/// Throws std::invalid_argument (bad sizes, null pointers).
void nonfinite_blocks(const void* data, int64_t numel, int element_size, uint64_t exponent_bits,
                      int64_t block_elements, int64_t* out, int64_t out_stride);

/// rope_forward: rotary position embedding of x, fused (kernels/rope_math.h).
///   x     [S, B, H, D] type T, strided as `dims` says (last dimension dense), D even
///   cos, sin [S, D] type T, contiguous (the model's tables)
///   y     [S, B, H, D] type T, contiguous, output
/// y = x·cos + cat(−x[..., D/2:], x[..., :D/2])·sin with LibTorch's per-op roundings: bitwise
/// the composite of harness/model/layers.cc. Elementwise (batch invariant).
/// Throws std::invalid_argument (negative sizes, odd D, null pointers with nonzero sizes).
template <typename T>
void rope_forward(const T* x, const RopeDims& dims, const T* cos, const T* sin, T* y);

/// rope_backward: dx of rope_forward from the output gradient `grad` (strided as `dims`), dx
/// [S, B, H, D] contiguous; bitwise the composite's autograd (kernels/rope_math.h).
/// Throws std::invalid_argument like rope_forward.
template <typename T>
void rope_backward(const T* grad, const RopeDims& dims, const T* cos, const T* sin, T* dx);

/// attention_forward: the harness's causal attention of each of dims.n (sample, head) pairs,
/// o = softmax(q·kᵀ·scale + causal mask)·v, in kernels/attention_math.h's fixed order.
///   b.q, b.k, b.v  [n, s, hn] type T, contiguous
///   b.o            [n, s, hn] type T, output
///   b.lse          [n, s] Acc<T>, output: each row's log Σ exp (the backward's input)
///   b.probs        [n, s, s] Acc<T>, scratch
/// scale is rounded to Acc<T>. Deterministic and batch-invariant (pairs are independent).
/// Throws std::invalid_argument (negative sizes, a non-finite scale, null pointers with nonzero
/// sizes). Follows FlashAttention-2's forward (Dao 2023) without tiling.
template <typename T>
void attention_forward(const AttentionForwardBuffers<T>& b, const AttentionDims& dims,
                       double scale);

/// attention_backward: dq, dk, dv [n, s, hn] type T of attention_forward from the output
/// gradient b.d_o [n, s, hn] and the forward's q, k, v, o, lse (kernels/attention_math.h);
/// b.probs, b.ds [n, s, s] and b.delta [n, s] Acc<T> are scratch. Throws like attention_forward.
template <typename T>
void attention_backward(const AttentionBackwardBuffers<T>& b, const AttentionDims& dims,
                        double scale);

}  // namespace mtp::kernels::cpu
