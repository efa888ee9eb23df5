// File: kernels/ops.h
//
// LibTorch autograd ops over the deterministic kernels, with the semantics of the model's ops
// (harness/model/layers.h: embedding_lookup, rms_norm; harness/model/loss.h: cross_entropy) so
// that they can replace them. CPU tensors run the CPU kernels (kernels/cpu); CUDA tensors run the
// CUDA kernels (kernels/cuda) when mtp_kernels was built against a CUDA LibTorch
// (MTP_KERNELS_WITH_CUDA), and are rejected otherwise. dtypes: float32, bfloat16 (fp32
// accumulation), float64 (fp64 accumulation; for gradient checks). Inputs need not be
// contiguous. Errors are c10::Error (TORCH_CHECK) for bad shapes, dtypes and devices, and the
// kernels' std::out_of_range for an id or label outside [0, V) on the CPU.
//
// Example:
//   auto x = mtp::kernels::embedding_lookup(ids, table);              // [s, b, H]
//   auto h = mtp::kernels::rms_norm(x, norm_weight, 1e-5);
//   auto ce = mtp::kernels::masked_cross_entropy(logits, labels, mask);  // [b, s]
#pragma once

#include <ATen/ATen.h>

namespace mtp::kernels {

/// embedding_lookup: ids [b, s] int64, table [V, H] → [s, b, H] (contiguous, table's dtype).
/// Forward: index_select (as harness/model embedding_lookup). Backward (table only): the
/// atomic-free kernel, grad_table[v] = Σ of the output gradients of the tokens with id v in
/// ascending flat [b, s] position (b-major), summed in the accumulation type from +0.
at::Tensor embedding_lookup(const at::Tensor& ids, const at::Tensor& table);

/// rms_norm: x [..., H], weight [H] (same dtype as x) → x · rsqrt(mean(x²) + eps) · weight,
/// shape and dtype of x. Reduction orders: kernels/numerics.h (per row; dweight over fixed
/// 64-row blocks). Differentiable in x and weight.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

/// rope: rotary position embedding, fused: x [s, b, heads, hn] (hn even; any strides with the
/// last dimension dense, else copied), cos and sin [s, hn] of x's dtype and device (the model's
/// tables) → x·cos + cat(−x[..., hn/2:], x[..., :hn/2])·sin, [s, b, heads, hn] contiguous.
/// Bitwise equal to that composite and to its autograd gradient (kernels/rope_math.h) in fp32,
/// fp64 and bf16, on CPU and GPU: one kernel forward and one backward instead of the
/// composite's ~5 and ~9. Differentiable in x (the tables are constants). Megatron
/// apply_rotary_pos_emb_bshd (rotary_interleaved off). c10::Error for bad shapes, dtypes or
/// devices.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// swiglu: the SwiGLU activation silu(gate) · up of gate_up [..., 2F] (gate the first F of the
/// last dimension, up the last F; float32, float64 or bfloat16) → [..., F] contiguous, of
/// gate_up's dtype. On CUDA one kernel forward and one backward (kernels/cuda/swiglu.cu) instead
/// of the composite's two and four (silu, mul; two muls, silu_backward and chunk's cat), saving
/// gate_up alone for the backward; each replays LibTorch's CUDA composite
/// `at::silu(gate) * up` rounding for rounding, which KernelOpsCudaTest checks bitwise. On the CPU
/// it is that composite (LibTorch's vectorised CPU exp cannot be replayed here). Megatron MLP
/// with gated_linear_unit and silu (bias_swiglu_impl without bias). Differentiable in gate_up.
/// c10::Error for an odd or empty last dimension, another dtype or device.
at::Tensor swiglu(const at::Tensor& gate_up);

/// cross_entropy: logits [s, b, V], labels [b, s] int64 in [0, V) → ce [b, s] =
/// ln Σ exp(l − max) − (l_label − max), as harness/model cross_entropy; dtype fp32 for fp32 and
/// bf16 logits, fp64 for fp64. The caller applies the loss mask. Differentiable in logits.
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels);

/// masked_cross_entropy: cross_entropy(logits, labels) · mask, mask [b, s] (any floating dtype,
/// converted to the loss dtype), with the mask applied inside the kernel (forward and backward).
at::Tensor masked_cross_entropy(const at::Tensor& logits, const at::Tensor& labels,
                                const at::Tensor& mask);

/// block_digests: the record digests' blocks of `t`'s bytes (harness/record/digest.h), computed
/// on t's device: t any dtype and shape (made contiguous), cut into blocks of `block_elements`
/// elements (the last one shorter; block_elements · element size ≤ 512 KiB) → int64
/// [ceil(numel / block_elements), 2] on t's device, per block the XXH3-128 (seed 0) of its bytes,
/// high half then low, as bit patterns (kernels/xxh3.h; libxxhash's value). On CUDA it runs on
/// the current stream, ordered after the work that produced t. c10::Error for a bad
/// block_elements or a device without the kernels.
at::Tensor block_digests(const at::Tensor& t, int64_t block_elements);

/// block_summaries: what a digest-only record keeps of `t`, per block as block_digests cuts it,
/// computed on t's device → int64 [blocks, 5]: the block's digest (high, low: block_digests'
/// values), its count of non-finite elements (exponent bits all ones, kernels/nonfinite.h; 0
/// for integer and bool dtypes), the flat index in t of its first non-finite element (−1: none)
/// and that element's bits, zero-extended (0: none). Two kernels and one allocation, whatever
/// t's size (the step recorder calls it for every recorded tensor). On CUDA on the current
/// stream. c10::Error as block_digests, and for a complex dtype.
at::Tensor block_summaries(const at::Tensor& t, int64_t block_elements);

/// BlockSummaryBatch: block_summaries of several tensors, made together.
struct BlockSummaryBatch {
  at::Tensor rows;  ///< int64 [Σ blocks_i, 5] on the tensors' device
  std::vector<int64_t>
      first_row;  ///< n + 1 values: tensor i's rows are [first_row[i], first_row[i + 1])

  /// of: tensor i's rows, [blocks_i, 5] (a view of `rows`).
  at::Tensor of(size_t i) const {
    return rows.narrow(0, first_row.at(i), first_row.at(i + 1) - first_row[i]);
  }
};

/// block_summaries of a list: each tensor's rows bitwise as block_summaries(ts[i]) gives them,
/// in one int64 [Σ blocks_i, 5] allocation. On CUDA two kernel launches per 64 non-empty
/// tensors on the current stream, their blocks side by side (a record's many small tensors
/// would otherwise pay each launch's latency one after another: kernels/cuda/span_table.cuh).
/// Every tensor on one device. c10::Error as block_summaries, and for tensors on different
/// devices.
BlockSummaryBatch block_summaries(at::TensorList ts, int64_t block_elements);

/// accumulate_main_grad: main_grad += grad, bitwise at::add_ (Megatron's DDP hook,
/// param.main_grad.add_(param.grad)), not differentiable. An fp32 main grad and a bf16 grad,
/// both contiguous on CUDA, take one vectorized kernel (kernels/cuda/accumulate.cu: LibTorch
/// runs that mixed-dtype add unvectorized); anything else is at::add_ itself. c10::Error for
/// different shapes or devices.
void accumulate_main_grad(at::Tensor& main_grad, const at::Tensor& grad);

/// cuda_kernels_built: whether CUDA tensors can be dispatched (built against a CUDA LibTorch).
bool cuda_kernels_built();

/// causal_attention: q, k, v [b, heads, s, hn] (float32, float64 or bf16; CPU or CUDA; one dtype
/// and device) → softmax(q·kᵀ·scale + causal mask)·v [b, heads, s, hn] in q's dtype: the
/// harness's own attention (attention_backend = "harness"), kernels/attention_math.h's fixed
/// order on both devices (the CPU and the GPU give the same bits for fp32 and bf16).
/// Differentiable in q, k, v (its own backward; no partial buffers, no atomics): deterministic
/// and batch-invariant by construction, the whole batch in one launch. Not bitwise equal to the
/// unfused composite or to flash (another summation order, probabilities kept in fp32); within
/// the bounds ops_test.cc checks against fp64. Memory: an [b·heads, s, s] fp32 scratch per call
/// (two in the backward): for short sequences, where attention is launch-bound. c10::Error for
/// mismatched shapes, dtypes or devices, another dtype or a non-finite scale.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale);

/// flash_attention_available: whether flash_causal_attention can run (LibTorch >= 2 with CUDA).
bool flash_attention_available();

/// flash_causal_attention: q, k, v [b, heads, s, hn] (bf16 or fp16, CUDA, one dtype) → the causal
/// attention output [b, heads, s, hn], softmax(q·kᵀ·scale + causal mask)·v, computed by LibTorch's
/// flash-attention kernel (at::_scaled_dot_product_flash_attention; the mask is −∞ above the
/// diagonal, which gives the probabilities of Megatron's −10000 fill in fp32: exactly 0).
/// Differentiable in q, k, v through LibTorch's flash backward, which LibTorch runs in its
/// deterministic mode when deterministic algorithms are on. Batch-invariant by construction:
/// each sample is its own kernel call (LibTorch's deterministic dq accumulation is split by a
/// count that depends on b·heads); outputs and grads are concatenated. At b > 1 this costs
/// time (b = 8, 16 heads, s 2048 on an H200: 2.99 ms against 1.37 ms batched). The GPU test
/// battery (ops_cuda_test.cc) checks bitwise repeatability, batch invariance, an fp64 reference and
/// that poisoned (NaN) free memory does not reach the outputs.
/// Not bitwise equal to the unfused composite (another summation order). c10::Error for another
/// dtype or device, mismatched shapes, or a LibTorch without it.
at::Tensor flash_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  double scale);

}  // namespace mtp::kernels
