// File: kernels/cuda/embedding.cu
//
// Word-embedding backward on the GPU without atomics: a stable radix sort of (id, position),
// the start of every row's segment of the sorted order (one binary search per row, all rows in
// parallel), then one block per row: each thread sums its columns (16-byte vectors when the row
// allows) over the row's segment in ascending position and writes them, zeros for a row no
// token uses (kernels_cuda.h; the order of kernels/cpu/embedding_cpu.cc, so the bits are those
// of the CPU kernel). The table is written once and grad_out read once: the kernel moves
// V·H·e + T·H·e bytes, the copy-bandwidth bound of the algorithm.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/device_reduce.cuh"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/internal/arg_checks.h"

namespace mtp::kernels::cuda {
namespace {

using detail::grid_blocks;

constexpr int64_t kMaxIndex = INT32_MAX - 1;  // positions and keys are 32-bit
constexpr int kThreads = 256;
constexpr size_t kAlign = 256;

size_t align_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

/// Bits needed for keys 0..vocab (vocab itself is the key of an out-of-range id).
int key_bits(int64_t vocab) {
  int bits = 1;
  while ((int64_t{1} << bits) <= vocab) {
    ++bits;
  }
  return bits;
}

/// The workspace carve-up: four 32-bit arrays of T entries, the V + 1 row starts, then CUB's
/// scratch.
struct Workspace {
  uint32_t* keys_in = nullptr;
  uint32_t* keys_out = nullptr;
  int32_t* pos_in = nullptr;
  int32_t* pos_out = nullptr;
  int32_t* row_start = nullptr;
  void* sort_scratch = nullptr;
  size_t sort_bytes = 0;
  size_t total = 0;
};

Workspace plan(int64_t num_tokens, int64_t vocab, void* base) {
  Workspace w;
  if (num_tokens == 0) {
    return w;
  }
  MTP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, w.sort_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<int>(num_tokens), 0, key_bits(vocab)));
  const size_t array = align_up(static_cast<size_t>(num_tokens) * 4);
  const size_t starts = align_up(static_cast<size_t>(vocab + 1) * 4);
  w.total = 4 * array + starts + align_up(w.sort_bytes);
  if (base != nullptr) {
    char* p = static_cast<char*>(base);
    w.keys_in = reinterpret_cast<uint32_t*>(p);
    w.keys_out = reinterpret_cast<uint32_t*>(p + array);
    w.pos_in = reinterpret_cast<int32_t*>(p + 2 * array);
    w.pos_out = reinterpret_cast<int32_t*>(p + 3 * array);
    w.row_start = reinterpret_cast<int32_t*>(p + 4 * array);
    w.sort_scratch = p + 4 * array + starts;
  }
  return w;
}

/// keys[t] = ids[t] when in [0, V), else V; pos[t] = t.
__global__ void embedding_keys_kernel(const int64_t* ids, int64_t num_tokens, int64_t vocab,
                                      uint32_t* keys, int32_t* pos) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < num_tokens;
       t += stride) {
    const int64_t id = ids[t];
    keys[t] = static_cast<uint32_t>(id >= 0 && id < vocab ? id : vocab);
    pos[t] = static_cast<int32_t>(t);
  }
}

/// First index in sorted keys[0, n) whose key is ≥ value.
__device__ int64_t lower_bound(const uint32_t* keys, int64_t n, int64_t value) {
  int64_t lo = 0;
  int64_t hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<int64_t>(keys[mid]) < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// row_start[v] = the first sorted index whose key is ≥ v, for v in [0, V] (row v's segment is
/// [row_start[v], row_start[v + 1])). One thread per row.
__global__ void embedding_row_start_kernel(const uint32_t* keys, int64_t num_tokens, int64_t vocab,
                                           int32_t* row_start) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v <= vocab;
       v += stride) {
    row_start[v] = static_cast<int32_t>(lower_bound(keys, num_tokens, v));
  }
}

/// kVec elements of T in one 16-byte load.
template <typename T>
struct alignas(16) Vec {
  static constexpr int kVec = 16 / sizeof(T);
  T v[kVec];
};

/// Block v (grid-stride over rows): grad_table[v, j] = Σ_{k in v's segment, ascending}
/// grad_out[pos[k], j] for every column j, kVec consecutive columns per thread when
/// `vectorized` (hidden % kVec == 0 and both pointers 16-byte aligned), one otherwise. Rows no
/// token uses are written as zeros.
template <typename T, bool vectorized>
__global__ void embedding_accumulate_kernel(const T* grad_out, const int32_t* row_start,
                                            const int32_t* pos, int64_t hidden, int64_t vocab,
                                            T* grad_table) {
  using A = Acc<T>;
  constexpr int kVec = vectorized ? Vec<T>::kVec : 1;
  const int64_t groups = hidden / kVec;
  for (int64_t v = blockIdx.x; v < vocab; v += gridDim.x) {
    const int32_t begin = row_start[v];
    const int32_t end = row_start[v + 1];
    for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
      A acc[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] = A(0);
      for (int32_t k = begin; k < end; ++k) {
        const T* src = grad_out + static_cast<int64_t>(pos[k]) * hidden + g * kVec;
        if constexpr (vectorized) {
          const Vec<T> in = *reinterpret_cast<const Vec<T>*>(src);
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[e] = acc[e] + load_acc(in.v[e]);
        } else {
          acc[0] = acc[0] + load_acc(*src);
        }
      }
      T* dst = grad_table + v * hidden + g * kVec;
      if constexpr (vectorized) {
        Vec<T> out;
#pragma unroll
        for (int e = 0; e < kVec; ++e) out.v[e] = store_as<T>(acc[e]);
        *reinterpret_cast<Vec<T>*>(dst) = out;
      } else {
        *dst = store_as<T>(acc[0]);
      }
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

size_t embedding_backward_workspace_bytes(int64_t num_tokens, int64_t vocab) {
  constexpr const char* kFn = "cuda::embedding_backward_workspace_bytes";
  internal::require_size(kFn, "num_tokens", num_tokens, kMaxIndex);
  internal::require_size(kFn, "vocab", vocab, kMaxIndex);
  return plan(num_tokens, vocab, nullptr).total;
}

template <typename T>
void embedding_backward(const T* grad_out, const int64_t* ids, int64_t num_tokens, int64_t hidden,
                        int64_t vocab, T* grad_table, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
  constexpr const char* kFn = "cuda::embedding_backward";
  internal::check_embedding_backward(kFn, grad_out, ids, grad_table, num_tokens, hidden, vocab,
                                     kMaxIndex);
  if (vocab == 0 || hidden == 0) {
    return;
  }
  if (num_tokens == 0) {  // no token uses any row: the whole table is +0
    MTP_CUDA_CHECK(
        cudaMemsetAsync(grad_table, 0, static_cast<size_t>(vocab * hidden) * sizeof(T), stream));
    return;
  }
  Workspace w = plan(num_tokens, vocab, workspace);
  if (workspace_bytes < w.total || (w.total > 0 && workspace == nullptr)) {
    throw std::invalid_argument(std::string(kFn) + ": workspace of " +
                                std::to_string(workspace_bytes) + " bytes, need " +
                                std::to_string(w.total));
  }
  embedding_keys_kernel<<<grid_blocks(num_tokens, kThreads, 1 << 16), kThreads, 0, stream>>>(
      ids, num_tokens, vocab, w.keys_in, w.pos_in);
  MTP_CUDA_CHECK(cudaGetLastError());
  size_t sort_bytes = w.sort_bytes;
  MTP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(w.sort_scratch, sort_bytes, w.keys_in, w.keys_out,
                                                 w.pos_in, w.pos_out, static_cast<int>(num_tokens),
                                                 0, key_bits(vocab), stream));
  embedding_row_start_kernel<<<grid_blocks(vocab + 1, kThreads, 1 << 16), kThreads, 0, stream>>>(
      w.keys_out, num_tokens, vocab, w.row_start);
  MTP_CUDA_CHECK(cudaGetLastError());
  // One block per row (grid-stride beyond 2^20 rows); threads cover the row's columns.
  constexpr int kVec = Vec<T>::kVec;
  const bool vectorized = hidden % kVec == 0 && aligned16(grad_out) && aligned16(grad_table);
  const int64_t per_thread = vectorized ? kVec : 1;
  const int threads = static_cast<int>(
      std::min<int64_t>(kThreads, std::max<int64_t>(32, (hidden / per_thread + 31) / 32 * 32)));
  const unsigned blocks = grid_blocks(vocab, 1, 1 << 20);
  if (vectorized) {
    embedding_accumulate_kernel<T, true><<<blocks, threads, 0, stream>>>(
        grad_out, w.row_start, w.pos_out, hidden, vocab, grad_table);
  } else {
    embedding_accumulate_kernel<T, false><<<blocks, threads, 0, stream>>>(
        grad_out, w.row_start, w.pos_out, hidden, vocab, grad_table);
  }
  MTP_CUDA_CHECK(cudaGetLastError());
}

template void embedding_backward<float>(const float*, const int64_t*, int64_t, int64_t, int64_t,
                                        float*, void*, size_t, cudaStream_t);
template void embedding_backward<double>(const double*, const int64_t*, int64_t, int64_t, int64_t,
                                         double*, void*, size_t, cudaStream_t);
template void embedding_backward<Bf16>(const Bf16*, const int64_t*, int64_t, int64_t, int64_t,
                                       Bf16*, void*, size_t, cudaStream_t);

}  // namespace mtp::kernels::cuda
