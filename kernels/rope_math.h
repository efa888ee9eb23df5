// File: kernels/rope_math.h
//
// Rotary position embedding (RoPE) per element, written once for the host and the device
// (kernels/cpu/rope_cpu.cc, kernels/cuda/rope.cu). Unlike the other kernels it has no order of
// its own to fix: it replays the harness's composite (harness/model/layers.cc apply_rope:
// x·cos + cat(−x₂, x₁)·sin, Megatron's _rotate_half / apply_rotary_pos_emb_bshd with
// rotary_interleaved off) operation for operation, each product and sum rounded to T as LibTorch
// rounds each op's output, so the fused op is bitwise equal to the composite in fp32, fp64 and
// bf16 and swapping one for the other changes no record.
//
// Forward, per element d of a row (half = D/2; rot_d = −x_{d+half} for d < half, x_{d−half}
// otherwise):  y_d = R(R(x_d·cos_d) + R(rot_d·sin_d)), R = rounding to T.
// Backward (autograd of the composite): x_d receives g_d·cos_d from the product, the rotated
// copy's gradient R(g·sin) through cat/neg/narrow, and a zero from the other narrow's
// zero-filled gradient. Any order of those three sums gives
//   dx_d = R(R(R(g_d·cos_d) + r_d) + 0),  r_d = R(g_{d+half}·sin_{d+half}) for d < half,
//                                         r_d = −R(g_{d−half}·sin_{d−half}) otherwise,
// the "+ 0" turning a −0 into +0 as the composite's zero term does.
#pragma once

#include <cstdint>

#include "kernels/numerics.h"

namespace mtp::kernels {

/// RopeDims: x [S, B, H, D] (sequence, micro-batch, heads, head dim; D even) with element
/// (i, j, h, d) at i·stride_s + j·stride_b + h·stride_h + d (the last dimension dense);
/// cos and sin [S, D] contiguous.
struct RopeDims {
  int64_t s = 0, b = 0, heads = 0, dim = 0;
  int64_t stride_s = 0, stride_b = 0, stride_h = 0;
  /// Number of elements S·B·H·D.
  MTP_KERNELS_HD int64_t numel() const { return s * b * heads * dim; }
  /// Offset of row (i, j, h) for the output's contiguous flat index `n` of element d = n mod D.
  MTP_KERNELS_HD int64_t row_offset(int64_t n) const {
    int64_t r = n / dim;
    const int64_t h = r % heads;
    r /= heads;
    const int64_t j = r % b;
    const int64_t i = r / b;
    return i * stride_s + j * stride_b + h * stride_h;
  }
};

/// rope_forward_element: y_d of the row starting at `x` (file comment); cs/sn the row i of
/// cos/sin.
template <typename T>
MTP_KERNELS_HD inline T rope_forward_element(const T* x, const T* cs, const T* sn, int64_t d,
                                             int64_t half) {
  using A = Acc<T>;
  const A rot = d < half ? -load_acc(x[d + half]) : load_acc(x[d - half]);
  const T a = store_as<T>(load_acc(x[d]) * load_acc(cs[d]));
  const T b = store_as<T>(rot * load_acc(sn[d]));
  return store_as<T>(load_acc(a) + load_acc(b));
}

/// rope_backward_element: dx_d of the row whose output gradient starts at `g` (file comment).
template <typename T>
MTP_KERNELS_HD inline T rope_backward_element(const T* g, const T* cs, const T* sn, int64_t d,
                                              int64_t half) {
  using A = Acc<T>;
  const T a = store_as<T>(load_acc(g[d]) * load_acc(cs[d]));
  const A r = d < half ? load_acc(store_as<T>(load_acc(g[d + half]) * load_acc(sn[d + half])))
                       : -load_acc(store_as<T>(load_acc(g[d - half]) * load_acc(sn[d - half])));
  const T sum = store_as<T>(load_acc(a) + r);
  return store_as<T>(load_acc(sum) + A(0));
}

}  // namespace mtp::kernels
