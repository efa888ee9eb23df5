// File: harness/model/testing/rope_check.h
//
// Test helper shared by kernels/ops_test.cc (CPU) and kernels/ops_cuda_test.cc (GPU): the fused
// RoPE op (kernels::rope) against the model's composite (harness/model/layers.h apply_rope),
// forward values and input gradients, compared bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "harness/model/layers.h"
#include "kernels/ops.h"

namespace mtp::kernels::testing {

/// Bitwise equality of two tensors of one dtype and shape (their contiguous bytes).
inline ::testing::AssertionResult rope_same_bits(const std::string& what, const at::Tensor& a,
                                                 const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
    return ::testing::AssertionFailure() << what << ": " << a.sizes() << " " << a.scalar_type()
                                         << " vs " << b.sizes() << " " << b.scalar_type();
  }
  const at::Tensor ac = a.detach().cpu().contiguous(), bc = b.detach().cpu().contiguous();
  if (std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0) {
    return ::testing::AssertionSuccess();
  }
  const at::Tensor differ = ac.to(at::kDouble).ne(bc.to(at::kDouble)) |
                            ac.to(at::kDouble).signbit().ne(bc.to(at::kDouble).signbit());
  return ::testing::AssertionFailure()
         << what << ": " << differ.sum().item<int64_t>() << " of " << ac.numel()
         << " elements differ in value or in the sign of a zero";
}

/// Checks kernels::rope against model::apply_rope on `device` in `dtype`: q is a strided view
/// of a fused [s, b, heads, 3·hn] qkv leaf (as the model's attention takes it), with exact
/// zeros of both signs in the input and in the output gradient (−0 products are where a
/// different summation of the composite's zero term would show), and the output gradient
/// non-contiguous. Forward output and the qkv leaf's gradient must be bitwise equal; then the
/// fused op must repeat bitwise and give each sample alone the bits it gives it in the batch.
inline void expect_rope_matches_composite(at::ScalarType dtype, const at::Device& device,
                                          int64_t s = 24, int64_t b = 3, int64_t heads = 4,
                                          int64_t hn = 16, uint64_t seed = 5) {
  at::manual_seed(seed);
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  at::Tensor qkv0 = at::randn({s, b, heads, 3 * hn}, opts);
  qkv0.masked_fill_(at::rand({s, b, heads, 3 * hn}, opts) < 0.1, 0.0);
  qkv0.masked_fill_(at::rand({s, b, heads, 3 * hn}, opts) < 0.1, -0.0);
  // Output gradient made [s, b, heads, hn] from a [b, s, heads, hn] tensor: not contiguous.
  at::Tensor g = at::randn({b, s, heads, hn}, opts);
  g.masked_fill_(at::rand({b, s, heads, hn}, opts) < 0.2, 0.0);
  g.masked_fill_(at::rand({b, s, heads, hn}, opts) < 0.2, -0.0);
  g = g.to(dtype).to(device).transpose(0, 1);
  const model::RopeTables tables = model::rope_tables(s, hn, 10000.0, dtype, device);

  at::Tensor outs[2], grads[2];
  for (int fused = 0; fused < 2; ++fused) {
    // clone(): a fresh leaf each time (to() returns qkv0 itself when nothing changes).
    const at::Tensor qkv = qkv0.to(dtype).to(device).clone().requires_grad_(true);
    const at::Tensor q = qkv.narrow(-1, 0, hn);  // strided: row stride 3·hn
    outs[fused] = fused ? rope(q, tables.cos, tables.sin) : model::apply_rope(q, tables);
    outs[fused].backward(g);
    grads[fused] = qkv.grad();
  }
  const std::string what = std::string(c10::toString(dtype)) + " on " + device.str();
  EXPECT_TRUE(rope_same_bits(what + ": forward", outs[1], outs[0]));
  EXPECT_TRUE(rope_same_bits(what + ": input gradient", grads[1], grads[0]));
  EXPECT_TRUE(outs[1].is_contiguous());

  // Repeats on fresh copies, and batch invariance: sample j of the batch alone gives sample j
  // of the batched result (forward and input gradient).
  for (int64_t j = -1; j < b; ++j) {
    const at::Tensor src = j < 0 ? qkv0 : qkv0.narrow(1, j, 1);
    const at::Tensor gj = j < 0 ? g : g.narrow(1, j, 1);
    const at::Tensor qkv = src.to(dtype).to(device).clone().requires_grad_(true);
    const at::Tensor out = rope(qkv.narrow(-1, 0, hn), tables.cos, tables.sin);
    out.backward(gj);
    const at::Tensor want_out = j < 0 ? outs[1] : outs[1].narrow(1, j, 1);
    const at::Tensor want_grad = j < 0 ? grads[1] : grads[1].narrow(1, j, 1);
    const std::string which = j < 0 ? "a repeat" : "sample " + std::to_string(j) + " alone";
    EXPECT_TRUE(rope_same_bits(what + ": forward, " + which, out, want_out));
    EXPECT_TRUE(rope_same_bits(what + ": input gradient, " + which, qkv.grad(), want_grad));
  }
}

}  // namespace mtp::kernels::testing
