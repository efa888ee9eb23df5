// File: kernels/cuda/embedding.cu
//
// Word-embedding backward on the GPU without atomics: a stable radix sort of (id, position),
// then one thread per (row, column) over its row's segment in ascending position
// (kernels_cuda.h; the order of kernels/cpu/embedding_cpu.cc).
#include <cub/device/device_radix_sort.cuh>

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

/// The workspace carve-up: four 32-bit arrays of T entries, then CUB's scratch.
struct Workspace {
  uint32_t* keys_in = nullptr;
  uint32_t* keys_out = nullptr;
  int32_t* pos_in = nullptr;
  int32_t* pos_out = nullptr;
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
  w.total = 4 * array + align_up(w.sort_bytes);
  if (base != nullptr) {
    char* p = static_cast<char*>(base);
    w.keys_in = reinterpret_cast<uint32_t*>(p);
    w.keys_out = reinterpret_cast<uint32_t*>(p + array);
    w.pos_in = reinterpret_cast<int32_t*>(p + 2 * array);
    w.pos_out = reinterpret_cast<int32_t*>(p + 3 * array);
    w.sort_scratch = p + 4 * array;
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

/// Thread (j, v): grad_table[v, j] = Σ_{k in v's segment, ascending} grad_out[pos[k], j].
template <typename T>
__global__ void embedding_accumulate_kernel(const T* grad_out, const uint32_t* keys,
                                            const int32_t* pos, int64_t num_tokens,
                                            int64_t hidden, int64_t vocab, T* grad_table) {
  using A = Acc<T>;
  __shared__ int64_t segment[2];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t v = blockIdx.y; v < vocab; v += gridDim.y) {
    if (threadIdx.x == 0) {
      segment[0] = lower_bound(keys, num_tokens, v);
      segment[1] = lower_bound(keys, num_tokens, v + 1);
    }
    __syncthreads();
    const int64_t begin = segment[0];
    const int64_t end = segment[1];
    __syncthreads();
    if (j < hidden) {
      A acc = A(0);
      for (int64_t k = begin; k < end; ++k) {
        acc = acc + load_acc(grad_out[static_cast<int64_t>(pos[k]) * hidden + j]);
      }
      grad_table[v * hidden + j] = store_as<T>(acc);
    }
  }
}

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
  Workspace w = plan(num_tokens, vocab, workspace);
  if (workspace_bytes < w.total || (w.total > 0 && workspace == nullptr)) {
    throw std::invalid_argument(std::string(kFn) + ": workspace of " +
                                std::to_string(workspace_bytes) + " bytes, need " +
                                std::to_string(w.total));
  }
  if (num_tokens > 0) {
    embedding_keys_kernel<<<grid_blocks(num_tokens, kThreads, 1 << 16), kThreads, 0, stream>>>(
        ids, num_tokens, vocab, w.keys_in, w.pos_in);
    MTP_CUDA_CHECK(cudaGetLastError());
    size_t sort_bytes = w.sort_bytes;
    MTP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        w.sort_scratch, sort_bytes, w.keys_in, w.keys_out, w.pos_in, w.pos_out,
        static_cast<int>(num_tokens), 0, key_bits(vocab), stream));
  }
  const dim3 grid(grid_blocks(hidden, kThreads, INT32_MAX), grid_blocks(vocab, 1, 65535));
  embedding_accumulate_kernel<T><<<grid, kThreads, 0, stream>>>(
      grad_out, w.keys_out, w.pos_out, num_tokens, hidden, vocab, grad_table);
  MTP_CUDA_CHECK(cudaGetLastError());
}

template void embedding_backward<float>(const float*, const int64_t*, int64_t, int64_t, int64_t,
                                        float*, void*, size_t, cudaStream_t);
template void embedding_backward<double>(const double*, const int64_t*, int64_t, int64_t, int64_t,
                                         double*, void*, size_t, cudaStream_t);
template void embedding_backward<Bf16>(const Bf16*, const int64_t*, int64_t, int64_t, int64_t,
                                       Bf16*, void*, size_t, cudaStream_t);

}  // namespace mtp::kernels::cuda
