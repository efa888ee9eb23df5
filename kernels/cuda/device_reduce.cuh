// File: kernels/cuda/device_reduce.cuh
//
// Device side of the kRowLanes row reduction order (kernels/numerics.h): a block of exactly
// kRowLanes threads, thread l holding lane l's fold, combined by the halving tree through shared
// memory. Private to kernels/cuda.
#pragma once

#include "kernels/numerics.h"

namespace mtp::kernels::cuda::detail {

/// SumOp / MaxNanOp: the two folds the kernels use (a + b and max_nan(a, b)).
struct SumOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
struct MaxNanOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return max_nan(a, b);
  }
};

/// block_tree_reduce: lanes combined in the order for s = kRowLanes/2 … 1: lane[i] =
/// op(lane[i], lane[i + s]), i < s. Call with blockDim.x == kRowLanes from every thread of the
/// block; `buf` is kRowLanes elements of shared memory. Returns the result to every thread.
template <typename A, typename Op>
__device__ inline A block_tree_reduce(A lane, A* buf, Op op) {
  const int tid = static_cast<int>(threadIdx.x);
  buf[tid] = lane;
  __syncthreads();
  for (int s = kRowLanes / 2; s > 0; s >>= 1) {
    if (tid < s) {
      buf[tid] = op(buf[tid], buf[tid + s]);
    }
    __syncthreads();
  }
  const A result = buf[0];
  __syncthreads();
  return result;
}

/// grid_blocks: blocks for a grid-stride loop over `work` items of `per_block` each, at least 1
/// and at most `cap`.
inline unsigned grid_blocks(int64_t work, int64_t per_block, int64_t cap) {
  int64_t blocks = (work + per_block - 1) / per_block;
  if (blocks < 1) {
    blocks = 1;
  }
  return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

/// row_column_grid: the grid of a [rows, cols] elementwise kernel whose blocks of `threads`
/// threads loop rows over x (r = blockIdx.x, += gridDim.x) and columns over y (c = blockIdx.y ·
/// threads + threadIdx.x, += gridDim.y · threads), each thread taking about `per_thread`
/// columns of a row: an element's row and column come from the loop counters, not from a 64-bit
/// division of a flat index (one per element cost the cross entropy backward, RoPE and SwiGLU
/// kernels 3–8x their memory time on the H100, 2026-12-07 profile).
inline dim3 row_column_grid(int64_t rows, int64_t cols, int threads, int per_thread) {
  constexpr int64_t kMaxX = int64_t{1} << 20, kMaxY = 65535;
  const int64_t y = (cols + int64_t{threads} * per_thread - 1) / (int64_t{threads} * per_thread);
  const int64_t gy = y < 1 ? 1 : (y < kMaxY ? y : kMaxY);
  const int64_t gx = rows < 1 ? 1 : (rows < kMaxX ? rows : kMaxX);
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), 1);
}

}  // namespace mtp::kernels::cuda::detail
