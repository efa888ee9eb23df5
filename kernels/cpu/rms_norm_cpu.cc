// File: kernels/cpu/rms_norm_cpu.cc
//
// RMSNorm forward and backward on the CPU, replaying the CUDA kernels' order (kernels_cpu.h).
#include <vector>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cpu {

template <typename T>
void rms_norm_forward(const T* x, const T* weight, int64_t rows, int64_t hidden, double eps, T* y,
                      Acc<T>* rstd) {
  constexpr const char* kFn = "rms_norm_forward";
  internal::check_rms_norm_forward(kFn, x, weight, y, rows, hidden);
  using A = Acc<T>;
  const A eps_a = static_cast<A>(eps);
  const A h_a = static_cast<A>(hidden);
  for (int64_t n = 0; n < rows; ++n) {
    const T* xr = x + n * hidden;
    const A ss = row_tree_reduce<A>(
        hidden, A(0),
        [&](int64_t j) {
          const A v = load_acc(xr[j]);
          return v * v;
        },
        [](A a, A b) { return a + b; });
    const A r = A(1) / sqrt_acc(ss / h_a + eps_a);
    if (rstd != nullptr) {
      rstd[n] = r;
    }
    T* yr = y + n * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      yr[j] = store_as<T>((load_acc(xr[j]) * r) * load_acc(weight[j]));
    }
  }
}

template <typename T>
void rms_norm_backward(const T* dy, const T* x, const T* weight, const Acc<T>* rstd, int64_t rows,
                       int64_t hidden, T* dx, T* dweight) {
  constexpr const char* kFn = "rms_norm_backward";
  internal::check_rms_norm_backward(kFn, dy, x, weight, rstd, dx, rows, hidden);
  using A = Acc<T>;
  const A h_a = static_cast<A>(hidden);

  if (dx != nullptr) {
    for (int64_t n = 0; n < rows; ++n) {
      const T* xr = x + n * hidden;
      const T* dyr = dy + n * hidden;
      const A r = rstd[n];
      const A d = row_tree_reduce<A>(
          hidden, A(0),
          [&](int64_t j) {
            const A xhat = load_acc(xr[j]) * r;
            const A g = load_acc(dyr[j]) * load_acc(weight[j]);
            return g * xhat;
          },
          [](A a, A b) { return a + b; });
      const A m = d / h_a;
      T* dxr = dx + n * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        const A xhat = load_acc(xr[j]) * r;
        const A g = load_acc(dyr[j]) * load_acc(weight[j]);
        dxr[j] = store_as<T>(r * (g - xhat * m));
      }
    }
  }

  if (dweight != nullptr) {
    std::vector<A> total(static_cast<size_t>(hidden), A(0));
    std::vector<A> partial(static_cast<size_t>(hidden));
    for (int64_t begin = 0; begin < rows; begin += kRmsNormDwRowsPerBlock) {
      const int64_t end =
          rows - begin < kRmsNormDwRowsPerBlock ? rows : begin + kRmsNormDwRowsPerBlock;
      for (int64_t j = 0; j < hidden; ++j) {
        partial[j] = A(0);
      }
      for (int64_t n = begin; n < end; ++n) {
        const T* xr = x + n * hidden;
        const T* dyr = dy + n * hidden;
        const A r = rstd[n];
        for (int64_t j = 0; j < hidden; ++j) {
          partial[j] = partial[j] + load_acc(dyr[j]) * (load_acc(xr[j]) * r);
        }
      }
      for (int64_t j = 0; j < hidden; ++j) {
        total[j] = total[j] + partial[j];
      }
    }
    for (int64_t j = 0; j < hidden; ++j) {
      dweight[j] = store_as<T>(total[j]);
    }
  }
}

#define MTP_INSTANTIATE_RMS_NORM(T)                                                             \
  template void rms_norm_forward<T>(const T*, const T*, int64_t, int64_t, double, T*, Acc<T>*); \
  template void rms_norm_backward<T>(const T*, const T*, const T*, const Acc<T>*, int64_t,      \
                                     int64_t, T*, T*);
MTP_INSTANTIATE_RMS_NORM(float)
MTP_INSTANTIATE_RMS_NORM(double)
MTP_INSTANTIATE_RMS_NORM(Bf16)
#undef MTP_INSTANTIATE_RMS_NORM

}  // namespace mtp::kernels::cpu
