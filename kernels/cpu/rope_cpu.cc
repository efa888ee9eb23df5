// File: kernels/cpu/rope_cpu.cc
//
// Fused RoPE forward and backward on the CPU (kernels_cpu.h, kernels/rope_math.h).
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cpu {

namespace {

/// Both directions: each output row of `in` (strided as `dims`) through the element function.
template <typename T, bool kBackward>
void rope_rows(const char* fn, const T* in, const RopeDims& dims, const T* cos, const T* sin,
               T* out) {
  if (!internal::check_rope(fn, in, cos, sin, out, dims.s, dims.b, dims.heads, dims.dim)) {
    return;
  }
  const int64_t n = dims.numel(), half = dims.dim / 2;
  for (int64_t row = 0; row * dims.dim < n; ++row) {
    const int64_t i = row / (dims.b * dims.heads);
    const T* r = in + dims.row_offset(row * dims.dim);
    const T* cs = cos + i * dims.dim;
    const T* sn = sin + i * dims.dim;
    for (int64_t d = 0; d < dims.dim; ++d) {
      out[row * dims.dim + d] = kBackward ? rope_backward_element(r, cs, sn, d, half)
                                          : rope_forward_element(r, cs, sn, d, half);
    }
  }
}

}  // namespace

template <typename T>
void rope_forward(const T* x, const RopeDims& dims, const T* cos, const T* sin, T* y) {
  rope_rows<T, false>("rope_forward", x, dims, cos, sin, y);
}

template <typename T>
void rope_backward(const T* grad, const RopeDims& dims, const T* cos, const T* sin, T* dx) {
  rope_rows<T, true>("rope_backward", grad, dims, cos, sin, dx);
}

#define MTP_INSTANTIATE_ROPE(T)                                                     \
  template void rope_forward<T>(const T*, const RopeDims&, const T*, const T*, T*); \
  template void rope_backward<T>(const T*, const RopeDims&, const T*, const T*, T*);
MTP_INSTANTIATE_ROPE(float)
MTP_INSTANTIATE_ROPE(double)
MTP_INSTANTIATE_ROPE(Bf16)
#undef MTP_INSTANTIATE_ROPE

}  // namespace mtp::kernels::cpu
