// File: harness/model/linear.h
//
// The bias-free linear layer as one autograd node. LibTorch's at::matmul(x, w.t()) records four
// nodes per call (TBackward0, the reshape's view node, MmBackward0, UnsafeViewBackward0) and
// dispatches ~8 more operators in the backward; one node of our own runs the same GEMMs on the
// same operands in the same layouts, so the bits are the composite's (kept by
// LinearTest.BitwiseTheMatmulComposite and every golden) with a quarter of the autograd nodes.
#pragma once

#include <ATen/ATen.h>

namespace mtp::model {

/// y = x · Wᵀ. x [..., in] (any float dtype, contiguous), weight [out, in] (contiguous, same
/// dtype and device) → [..., out]. Forward: mm(x.reshape(−1, in), weight.t()), as at::matmul
/// folds it (LibTorch 1.13 and 2.x alike for a contiguous x). Backward (FunctionsManual.cpp
/// mm_mat1_backward / mm_mat2_backward, then the transpose's and the views' backward):
/// dx = g·W [..., in] (x viewed [T, in] with strides (1, T), i.e. T = in = 1, takes LibTorch's
/// other branch: (Wᵀ·gᵀ)ᵀ),
/// dW = gᵀ·x [out, in] (weight.t() is column-major, so LibTorch computes (gᵀ·x)ᵀᵀ: the same
/// GEMM); an undefined incoming gradient gives undefined gradients, as the built-in nodes do.
/// Other inputs (x of fewer than 2 dims, a non-contiguous x, a weight whose transpose is not
/// column-major) take at::matmul itself.
/// Throws what at::mm throws (shape or dtype mismatch).
at::Tensor linear_node(const at::Tensor& x, const at::Tensor& weight);

}  // namespace mtp::model
