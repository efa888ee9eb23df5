// File: kernels/cpu/cross_entropy_cpu.cc
//
// Masked cross entropy forward and backward on the CPU, replaying the CUDA kernels' order
// (kernels_cpu.h).
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cpu {
namespace {

void check_labels(const char* fn, const int64_t* labels, int64_t rows, int64_t vocab) {
  for (int64_t n = 0; n < rows; ++n) {
    if (labels[n] < 0 || labels[n] >= vocab) {
      throw internal::index_error(fn, "labels", n, labels[n], vocab);
    }
  }
}

}  // namespace

template <typename T>
void cross_entropy_forward(const T* logits, const int64_t* labels, const Acc<T>* mask, int64_t rows,
                           int64_t vocab, Acc<T>* loss, Acc<T>* row_max, Acc<T>* row_sum) {
  constexpr const char* kFn = "cross_entropy_forward";
  internal::check_cross_entropy_forward(kFn, logits, labels, loss, rows, vocab);
  check_labels(kFn, labels, rows, vocab);
  using A = Acc<T>;
  for (int64_t n = 0; n < rows; ++n) {
    const T* lr = logits + n * vocab;
    const A mx = row_tree_reduce<A>(
        vocab, load_acc(lr[0]), [&](int64_t j) { return load_acc(lr[j]); },
        [](A a, A b) { return max_nan(a, b); });
    const A sum = row_tree_reduce<A>(
        vocab, A(0), [&](int64_t j) { return exp_acc(load_acc(lr[j]) - mx); },
        [](A a, A b) { return a + b; });
    const A m = mask != nullptr ? mask[n] : A(1);
    loss[n] = (log_acc(sum) - (load_acc(lr[labels[n]]) - mx)) * m;
    if (row_max != nullptr) {
      row_max[n] = mx;
    }
    if (row_sum != nullptr) {
      row_sum[n] = sum;
    }
  }
}

template <typename T>
void cross_entropy_backward(const T* logits, const int64_t* labels, const Acc<T>* mask,
                            const Acc<T>* grad_loss, const Acc<T>* row_max, const Acc<T>* row_sum,
                            int64_t rows, int64_t vocab, T* grad_logits) {
  constexpr const char* kFn = "cross_entropy_backward";
  const bool any = internal::check_cross_entropy_backward(kFn, logits, labels, grad_loss, row_max,
                                                          row_sum, grad_logits, rows, vocab);
  if (any) {
    check_labels(kFn, labels, rows, vocab);
  }
  using A = Acc<T>;
  for (int64_t n = 0; n < rows; ++n) {
    const T* lr = logits + n * vocab;
    T* gr = grad_logits + n * vocab;
    const A mx = row_max[n];
    const A sum = row_sum[n];
    const A coef = grad_loss[n] * (mask != nullptr ? mask[n] : A(1));
    const int64_t label = labels[n];
    for (int64_t j = 0; j < vocab; ++j) {
      const A p = exp_acc(load_acc(lr[j]) - mx) / sum;
      gr[j] = store_as<T>((j == label ? p - A(1) : p) * coef);
    }
  }
}

#define MTP_INSTANTIATE_CROSS_ENTROPY(T)                                                          \
  template void cross_entropy_forward<T>(const T*, const int64_t*, const Acc<T>*, int64_t,        \
                                         int64_t, Acc<T>*, Acc<T>*, Acc<T>*);                     \
  template void cross_entropy_backward<T>(const T*, const int64_t*, const Acc<T>*, const Acc<T>*, \
                                          const Acc<T>*, const Acc<T>*, int64_t, int64_t, T*);
MTP_INSTANTIATE_CROSS_ENTROPY(float)
MTP_INSTANTIATE_CROSS_ENTROPY(double)
MTP_INSTANTIATE_CROSS_ENTROPY(Bf16)
#undef MTP_INSTANTIATE_CROSS_ENTROPY

}  // namespace mtp::kernels::cpu
