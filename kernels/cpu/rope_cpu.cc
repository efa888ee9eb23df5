// File: kernels/cpu/rope_cpu.cc
//
// Fused RoPE forward and backward on the CPU (kernels_cpu.h, kernels/rope_math.h).
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cpu {

template <typename T>
void rope_forward(const T* x, const RopeDims& dims, const T* cos, const T* sin, T* y) {
  if (!internal::check_rope("rope_forward", x, cos, sin, y, dims.s, dims.b, dims.heads,
                            dims.dim)) {
    return;
  }
  const int64_t n = dims.numel(), half = dims.dim / 2;
  for (int64_t row = 0; row * dims.dim < n; ++row) {
    const int64_t i = row / (dims.b * dims.heads);
    const T* xr = x + dims.row_offset(row * dims.dim);
    for (int64_t d = 0; d < dims.dim; ++d) {
      y[row * dims.dim + d] =
          rope_forward_element(xr, cos + i * dims.dim, sin + i * dims.dim, d, half);
    }
  }
}

template <typename T>
void rope_backward(const T* grad, const RopeDims& dims, const T* cos, const T* sin, T* dx) {
  if (!internal::check_rope("rope_backward", grad, cos, sin, dx, dims.s, dims.b, dims.heads,
                            dims.dim)) {
    return;
  }
  const int64_t n = dims.numel(), half = dims.dim / 2;
  for (int64_t row = 0; row * dims.dim < n; ++row) {
    const int64_t i = row / (dims.b * dims.heads);
    const T* gr = grad + dims.row_offset(row * dims.dim);
    for (int64_t d = 0; d < dims.dim; ++d) {
      dx[row * dims.dim + d] =
          rope_backward_element(gr, cos + i * dims.dim, sin + i * dims.dim, d, half);
    }
  }
}

#define MTP_INSTANTIATE_ROPE(T)                                                        \
  template void rope_forward<T>(const T*, const RopeDims&, const T*, const T*, T*);   \
  template void rope_backward<T>(const T*, const RopeDims&, const T*, const T*, T*);
MTP_INSTANTIATE_ROPE(float)
MTP_INSTANTIATE_ROPE(double)
MTP_INSTANTIATE_ROPE(Bf16)
#undef MTP_INSTANTIATE_ROPE

}  // namespace mtp::kernels::cpu
