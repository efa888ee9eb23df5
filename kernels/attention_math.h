// File: kernels/attention_math.h
//
// The harness's own causal attention (attention_backend = "harness"), written once for the host
// and the device (kernels/cpu/attention_cpu.cc, kernels/cuda/attention.cu) so that both give the
// same bits. Every sum has one fixed order, independent of the launch, the batch and the number
// of heads: the op is deterministic and batch-invariant by construction, with no partial buffers
// to reduce (LibTorch's deterministic flash backward sums ceil(SMs / (b·heads)) partial dq
// buffers, which at short sequences costs more than the attention itself). It is exact attention,
// not bitwise any other implementation: softmax(q·kᵀ·scale + causal mask)·v, carried in Acc<T>
// (fp32 for fp32 and bf16, fp64 for fp64), probabilities not rounded to T, checked against an
// fp64 reference (kernels/cpu/attention_cpu_test.cc states the bounds). Its cost is O(s²) per
// (sample, head) in memory (an [s, s] scratch of Acc<T>) and it uses no tensor cores: meant for
// short sequences, where it is launch-bound.
//
// Per (sample, head) n, with q, k, v, o, do the [s, hn] rows of n, "Σ_x" a sum in Acc<T> from +0
// in ascending x, and R rounding to T:
//   forward   1. score_ij = (Σ_d q_id·k_jd)·scale                              for j ≤ i
//             2. per row i: m_i = max_j score_ij (ascending j, a NaN wins), e_ij = exp(score_ij −
//             m_i),
//                l_i = Σ_j e_ij, p_ij = e_ij / l_i, lse_i = m_i + log(l_i)
//             3. o_id = R(Σ_{j≤i} p_ij·v_jd)
//   backward  1. p_ij = exp(score_ij − lse_i), dp_ij = Σ_d do_id·v_jd           for j ≤ i
//             2. per row i: D_i = Σ_{j≤i} p_ij·dp_ij; ds_ij = p_ij·(dp_ij − D_i)
//             3. dq_id = R((Σ_{j≤i} ds_ij·k_jd)·scale), dk_jd = R((Σ_{i≥j} ds_ij·q_id)·scale),
//                dv_jd = R(Σ_{i≥j} p_ij·do_id)
// Each phase's elements are independent of each other, so a launch may take them in any order
// and any parallelism; phases follow each other. Follows the flash-attention backward's algebra
// (Dao, FlashAttention-2, Algorithm 2: dS = P ∘ (dP − D)) except that D is rowsum(P ∘ dP), equal
// to flash's rowsum(dO ∘ O) in exact arithmetic: it needs no forward output (o is not kept for
// the backward) and does not carry o's rounding to bf16 into the gradients.
#pragma once

#include <cstdint>

#include "kernels/numerics.h"

namespace mtp::kernels {

/// AttentionDims: n = b·heads (sample, head) pairs, each with s queries and s keys of head
/// dimension hn. q, k, v, o, do and the gradients are [n, s, hn] contiguous; lse and D [n, s]
/// and the scratch [n, s, s] contiguous, of Acc<T>.
struct AttentionDims {
  int64_t n = 0, s = 0, hn = 0;
  /// Offset of row i of pair p in an [n, s, hn] buffer.
  MTP_KERNELS_HD int64_t row(int64_t p, int64_t i) const { return (p * s + i) * hn; }
  /// Offset of (i, j) of pair p in an [n, s, s] buffer.
  MTP_KERNELS_HD int64_t square(int64_t p, int64_t i, int64_t j) const {
    return (p * s + i) * s + j;
  }
};

/// AttentionForwardBuffers: the forward's inputs q, k, v [n, s, hn] and outputs o [n, s, hn],
/// lse [n, s]; probs [n, s, s] is scratch (its upper triangle is never read or written).
template <typename T>
struct AttentionForwardBuffers {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  T* o = nullptr;
  Acc<T>* lse = nullptr;
  Acc<T>* probs = nullptr;
  /// The buffers of pair p alone (every pointer advanced to p's rows).
  MTP_KERNELS_HD AttentionForwardBuffers pair(const AttentionDims& d, int64_t p) const {
    const int64_t r = d.row(p, 0);
    return {q + r, k + r, v + r, o + r, lse + p * d.s, probs + d.square(p, 0, 0)};
  }
  /// Calls f(name, pointer) for every buffer (argument checks).
  template <typename F>
  void for_each_pointer(F&& f) const {
    f("q", q), f("k", k), f("v", v), f("o", o), f("lse", lse), f("probs", probs);
  }
};

/// AttentionBackwardBuffers: the backward's inputs (the forward's q, k, v, lse and the output
/// gradient d_o [n, s, hn]) and outputs dq, dk, dv [n, s, hn]; probs and ds [n, s, s] and
/// delta [n, s] are scratch.
template <typename T>
struct AttentionBackwardBuffers {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const T* d_o = nullptr;
  const Acc<T>* lse = nullptr;
  T* dq = nullptr;
  T* dk = nullptr;
  T* dv = nullptr;
  Acc<T>* probs = nullptr;
  Acc<T>* ds = nullptr;
  Acc<T>* delta = nullptr;
  /// The buffers of pair p alone (every pointer advanced to p's rows).
  MTP_KERNELS_HD AttentionBackwardBuffers pair(const AttentionDims& d, int64_t p) const {
    const int64_t r = d.row(p, 0), sq = d.square(p, 0, 0);
    return {q + r,  k + r,  v + r,      d_o + r, lse + p * d.s,  dq + r,
            dk + r, dv + r, probs + sq, ds + sq, delta + p * d.s};
  }
  /// Calls f(name, pointer) for every buffer (argument checks).
  template <typename F>
  void for_each_pointer(F&& f) const {
    f("q", q), f("k", k), f("v", v), f("d_o", d_o), f("lse", lse);
    f("dq", dq), f("dk", dk), f("dv", dv), f("probs", probs), f("ds", ds), f("delta", delta);
  }
};

/// attention_dot: Σ_d a_d·b_d over d < hn in Acc<T>, ascending from +0.
template <typename T>
MTP_KERNELS_HD inline Acc<T> attention_dot(const T* a, const T* b, int64_t hn) {
  Acc<T> sum = 0;
  for (int64_t d = 0; d < hn; ++d) sum = sum + load_acc(a[d]) * load_acc(b[d]);
  return sum;
}

/// attention_softmax_row: forward phase 2 on one row of i + 1 scores (j ≤ i), in place: the
/// scores become the probabilities p_ij; returns lse_i.
template <typename A>
MTP_KERNELS_HD inline A attention_softmax_row(A* row, int64_t count) {
  A m = row[0];
  for (int64_t j = 1; j < count; ++j) m = max_nan(m, row[j]);
  A l = 0;
  for (int64_t j = 0; j < count; ++j) {
    row[j] = exp_acc(row[j] - m);
    l = l + row[j];
  }
  for (int64_t j = 0; j < count; ++j) row[j] = row[j] / l;
  return m + log_acc(l);
}

/// attention_ds_row: backward phase 2 on one row of i + 1 entries, in place: dp_ij (in `ds`)
/// becomes ds_ij; returns D_i.
template <typename A>
MTP_KERNELS_HD inline A attention_ds_row(const A* p_row, A* ds_row, int64_t count) {
  A delta = 0;
  for (int64_t j = 0; j < count; ++j) delta = delta + p_row[j] * ds_row[j];
  for (int64_t j = 0; j < count; ++j) ds_row[j] = p_row[j] * (ds_row[j] - delta);
  return delta;
}

/// attention_output_element: forward phase 3, o_id from the probabilities of row i (`p_row`,
/// j ≤ i) and v [s, hn] of the pair.
template <typename T>
MTP_KERNELS_HD inline T attention_output_element(const Acc<T>* p_row, const T* v, int64_t i,
                                                 int64_t d, int64_t hn) {
  Acc<T> sum = 0;
  for (int64_t j = 0; j <= i; ++j) sum = sum + p_row[j] * load_acc(v[j * hn + d]);
  return store_as<T>(sum);
}

/// attention_dq_element: backward phase 3, dq_id from ds [s, s] and k [s, hn] of the pair.
template <typename T>
MTP_KERNELS_HD inline T attention_dq_element(const Acc<T>* ds, const T* k, int64_t i, int64_t d,
                                             int64_t s, int64_t hn, Acc<T> scale) {
  Acc<T> sum = 0;
  for (int64_t j = 0; j <= i; ++j) sum = sum + ds[i * s + j] * load_acc(k[j * hn + d]);
  return store_as<T>(sum * scale);
}

/// attention_column_element: backward phase 3, R((Σ_{i≥j} w_ij·x_id)·scale) over the column j of
/// w [s, s]: dk with w = ds, x = q and the softmax scale; dv with w = p, x = do and scale 1
/// (exact: x·1 = x for every x).
template <typename T>
MTP_KERNELS_HD inline T attention_column_element(const Acc<T>* w, const T* x, int64_t j, int64_t d,
                                                 int64_t s, int64_t hn, Acc<T> scale) {
  Acc<T> sum = 0;
  for (int64_t i = j; i < s; ++i) sum = sum + w[i * s + j] * load_acc(x[i * hn + d]);
  return store_as<T>(sum * scale);
}

}  // namespace mtp::kernels
