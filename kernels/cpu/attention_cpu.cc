// File: kernels/cpu/attention_cpu.cc
//
// The harness's causal attention on the CPU (kernels_cpu.h): kernels/attention_math.h's phases
// pair by pair, each element by the shared element functions, so the bits equal the CUDA path's.
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cpu {

template <typename T>
void attention_forward(const AttentionForwardBuffers<T>& b, const AttentionDims& dims,
                       double scale) {
  using A = Acc<T>;
  if (!internal::check_attention("attention_forward", b, dims.n, dims.s, dims.hn, scale)) return;
  const int64_t s = dims.s, hn = dims.hn;
  const A sc = static_cast<A>(scale);
  for (int64_t p = 0; p < dims.n; ++p) {
    const AttentionForwardBuffers<T> x = b.pair(dims, p);
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        x.probs[i * s + j] = attention_dot(x.q + i * hn, x.k + j * hn, hn) * sc;
      }
    }
    for (int64_t i = 0; i < s; ++i) x.lse[i] = attention_softmax_row(x.probs + i * s, i + 1);
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t d = 0; d < hn; ++d) {
        x.o[i * hn + d] = attention_output_element(x.probs + i * s, x.v, i, d, hn);
      }
    }
  }
}

template <typename T>
void attention_backward(const AttentionBackwardBuffers<T>& b, const AttentionDims& dims,
                        double scale) {
  using A = Acc<T>;
  if (!internal::check_attention("attention_backward", b, dims.n, dims.s, dims.hn, scale)) return;
  const int64_t s = dims.s, hn = dims.hn;
  const A sc = static_cast<A>(scale);
  for (int64_t p = 0; p < dims.n; ++p) {
    const AttentionBackwardBuffers<T> x = b.pair(dims, p);
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        x.probs[i * s + j] = exp_acc(attention_dot(x.q + i * hn, x.k + j * hn, hn) * sc - x.lse[i]);
        x.ds[i * s + j] = attention_dot(x.d_o + i * hn, x.v + j * hn, hn);
      }
    }
    for (int64_t i = 0; i < s; ++i) {
      x.delta[i] = attention_ds_row(x.probs + i * s, x.ds + i * s, i + 1);
    }
    for (int64_t r = 0; r < s; ++r) {
      for (int64_t d = 0; d < hn; ++d) {
        x.dq[r * hn + d] = attention_dq_element(x.ds, x.k, r, d, s, hn, sc);
        x.dk[r * hn + d] = attention_column_element(x.ds, x.q, r, d, s, hn, sc);
        x.dv[r * hn + d] = attention_column_element(x.probs, x.d_o, r, d, s, hn, A(1));
      }
    }
  }
}

#define MTP_INSTANTIATE_ATTENTION(T)                                                            \
  template void attention_forward<T>(const AttentionForwardBuffers<T>&, const AttentionDims&,   \
                                     double);                                                   \
  template void attention_backward<T>(const AttentionBackwardBuffers<T>&, const AttentionDims&, \
                                      double);
MTP_INSTANTIATE_ATTENTION(float)
MTP_INSTANTIATE_ATTENTION(double)
MTP_INSTANTIATE_ATTENTION(Bf16)
#undef MTP_INSTANTIATE_ATTENTION

}  // namespace mtp::kernels::cpu
