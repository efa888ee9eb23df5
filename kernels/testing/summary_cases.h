// File: kernels/testing/summary_cases.h
//
// Test support for kernels::block_summaries of a list (kernels/ops.h): tensors that cover what a
// record digests and the kernels' paths, made on any device (views made there, so that a
// device's tensor keeps its view's offset). Shared by the CPU and CUDA op tests.
#pragma once

#include <ATen/ATen.h>

#include <limits>
#include <vector>

namespace mtp::kernels::testing {

/// summary_cases: seven tensors (blocks of 65536 elements: 3, 2, 0, 1, 2, 3 and 2 blocks):
///   0  float32 [150000], +inf at 7 and NaN at 65539
///   1  bf16 [70001], −inf at its last element (a one-element block)
///   2  an empty float32 tensor
///   3  float64 [5]
///   4  int32 [100000] holding +inf's float bits (integers: no non-finite values)
///   5  float16 [500, 300], a transposed view
///   6  float32 [131072], a view starting 4 bytes into its storage (not 16-byte aligned), +inf
///      at its element 65536 (the first of its second block)
inline std::vector<at::Tensor> summary_cases(at::Device device, uint64_t seed = 15) {
  at::manual_seed(seed);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<at::Tensor> cases;
  at::Tensor f = at::randn({150000});
  f[7] = inf;
  f[65536 + 3] = std::numeric_limits<double>::quiet_NaN();
  cases.push_back(f.to(device));
  at::Tensor h = at::randn({70001}).to(at::kBFloat16);
  h[70000] = -inf;
  cases.push_back(h.to(device));
  cases.push_back(at::empty({0}, at::TensorOptions(device).dtype(at::kFloat)));
  cases.push_back(at::randn({5}, at::kDouble).to(device));
  cases.push_back(at::full({100000}, 0x7f800000, at::kInt).to(device));
  cases.push_back(at::randn({300, 500}).to(at::kHalf).to(device).t());
  at::Tensor shifted = at::randn({131073});
  shifted[65537] = inf;
  cases.push_back(shifted.to(device).narrow(0, 1, 131072));
  return cases;
}

}  // namespace mtp::kernels::testing
