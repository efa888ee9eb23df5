// File: kernels/cpu/embedding_cpu.cc
//
// embedding_backward on the CPU: a stable counting sort of the token ids, then one ascending
// pass per table row (kernels_cpu.h).
#include <vector>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cpu {

template <typename T>
void embedding_backward(const T* grad_out, const int64_t* ids, int64_t num_tokens, int64_t hidden,
                        int64_t vocab, T* grad_table) {
  constexpr const char* kFn = "embedding_backward";
  internal::check_embedding_backward(kFn, grad_out, ids, grad_table, num_tokens, hidden, vocab);
  using A = Acc<T>;

  // Stable counting sort: offsets[v] = first slot of row v; order[] = token positions, ascending
  // within each row.
  std::vector<int64_t> offsets(static_cast<size_t>(vocab) + 1, 0);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t id = ids[t];
    if (id < 0 || id >= vocab) {
      throw internal::index_error(kFn, "ids", t, id, vocab);
    }
    ++offsets[static_cast<size_t>(id) + 1];
  }
  for (int64_t v = 0; v < vocab; ++v) {
    offsets[v + 1] += offsets[v];
  }
  std::vector<int64_t> order(static_cast<size_t>(num_tokens));
  {
    std::vector<int64_t> cursor(offsets.begin(), offsets.end() - 1);
    for (int64_t t = 0; t < num_tokens; ++t) {
      order[cursor[ids[t]]++] = t;
    }
  }

  std::vector<A> acc(static_cast<size_t>(hidden));
  for (int64_t v = 0; v < vocab; ++v) {
    for (int64_t h = 0; h < hidden; ++h) {
      acc[h] = A(0);
    }
    for (int64_t k = offsets[v]; k < offsets[v + 1]; ++k) {
      const T* row = grad_out + order[k] * hidden;
      for (int64_t h = 0; h < hidden; ++h) {
        acc[h] = acc[h] + load_acc(row[h]);
      }
    }
    T* out = grad_table + v * hidden;
    for (int64_t h = 0; h < hidden; ++h) {
      out[h] = store_as<T>(acc[h]);
    }
  }
}

template void embedding_backward<float>(const float*, const int64_t*, int64_t, int64_t, int64_t,
                                        float*);
template void embedding_backward<double>(const double*, const int64_t*, int64_t, int64_t, int64_t,
                                         double*);
template void embedding_backward<Bf16>(const Bf16*, const int64_t*, int64_t, int64_t, int64_t,
                                       Bf16*);

}  // namespace mtp::kernels::cpu
