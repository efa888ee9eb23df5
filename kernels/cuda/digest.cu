// File: kernels/cuda/digest.cu
//
// Block digests (XXH3-128 per block) of a device buffer (kernels_cuda.h): the record's digests
// computed where the tensor lives, so that a digest-only record copies 16 bytes per block to the
// host instead of the tensor.
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cuda/span_table.cuh"
#include "kernels/internal/arg_checks.h"
#include "kernels/xxh3.h"

namespace mtp::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
/// Rounds a warp loads before it reduces them: their loads in flight together.
constexpr int kUnroll = 4;
constexpr uint64_t kMaxRounds = internal::kMaxDigestBlockBytes / xxh3::kRoundBytes;

__constant__ uint8_t kSecret[xxh3::kSecretSize] = {MTP_XXH3_DEFAULT_SECRET_BYTES};

/// One thread block per digest block. Inputs of at most 240 bytes: thread 0 alone. Longer ones:
/// the complete rounds 0 … R − 1 (R = full_rounds) and the final partial round R (its first
/// partial_stripes stripes) are summed by the warps, warp w taking rounds w, w + 16, …, kUnroll
/// of them at a time (their loads issued together): lane l reads bytes [32·l, 32·l + 32) of the
/// round (stripe l / 2, its words 4·(l mod 2) … + 3), and the 16 lanes of one parity add their
/// four lane sums by shuffles. Thread 0 then chains the complete rounds and finishes with the
/// partial round's sums and the last stripe (kernels/xxh3.h: chain_rounds, finish_long_summed).
/// Every sum is mod 2^64, so the result does not depend on the order of the additions: the
/// bits of the one-thread hash128. The block's latency, not the bandwidth, bounds the small
/// tensors a record digests: the loads are spread over 16 warps and issued kUnroll rounds at a
/// time, and the partial round is summed in parallel instead of by thread 0.
/// The spans of a batch (span_table.cuh) share the launch: thread block b digests its block
/// of span t.span_of(b) into row t.base + b.
__global__ void __launch_bounds__(kThreads)
    block_digests_kernel(const __grid_constant__ detail::SpanTable t, uint64_t* out,
                         uint64_t out_stride) {
  __shared__ __align__(16) uint8_t secret[xxh3::kSecretSize];
  __shared__ uint64_t sums[kMaxRounds + 1][8];  // + 1: the partial round
  const int span = t.span_of(blockIdx.x);
  const uint64_t row = t.base + blockIdx.x;
  const uint64_t block_bytes = t.block_elements * static_cast<uint64_t>(t.element_size[span]);
  const uint64_t begin = (row - t.first_block[span]) * block_bytes;
  const uint8_t* in = t.data[span] + begin;
  const uint64_t nbytes = t.nbytes[span];
  const uint64_t len = nbytes - begin < block_bytes ? nbytes - begin : block_bytes;
  for (int i = static_cast<int>(threadIdx.x); i < xxh3::kSecretSize; i += kThreads) {
    secret[i] = kSecret[i];
  }
  __syncthreads();
  if (len <= xxh3::kMidSizeMax) {
    if (threadIdx.x == 0) {
      const xxh3::Hash128 h = xxh3::hash128(in, len, secret);
      out[out_stride * row] = h.high;
      out[out_stride * row + 1] = h.low;
    }
    return;
  }
  const uint64_t rounds = xxh3::full_rounds(len);
  const uint64_t partial = xxh3::partial_stripes(len);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int stripe = lane >> 1, half = lane & 1;
  const uint8_t* k = secret + stripe * 8 + half * 32;
  // Rounds 0 … rounds (the last one partial); r is the same for the whole warp, so every lane
  // takes part in the shuffles.
  for (uint64_t r0 = warp; r0 <= rounds; r0 += uint64_t{kWarps} * kUnroll) {
    uint64_t v[kUnroll][4];
    bool active[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint64_t r = r0 + uint64_t{kWarps} * u;
      active[u] = r < rounds || (r == rounds && static_cast<uint64_t>(stripe) < partial);
      const uint8_t* p = in + r * xxh3::kRoundBytes + stripe * xxh3::kStripeBytes + half * 32;
#pragma unroll
      for (int j = 0; j < 4; ++j) v[u][j] = active[u] ? xxh3::detail::read64(p + 8 * j) : 0;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint64_t r = r0 + uint64_t{kWarps} * u;
      if (r > rounds) break;            // uniform over the warp
      uint64_t part[4] = {0, 0, 0, 0};  // accumulator lanes 4·half … 4·half + 3
      if (active[u]) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint64_t key = v[u][j] ^ xxh3::detail::read64(k + 8 * j);
          part[j ^ 1] += v[u][j];
          part[j] += (key & 0xffffffffULL) * (key >> 32);
        }
      }
      for (int offset = 2; offset < 32; offset <<= 1) {
#pragma unroll
        for (int j = 0; j < 4; ++j) part[j] += __shfl_xor_sync(0xffffffffu, part[j], offset);
      }
      if (lane < 2) {
#pragma unroll
        for (int j = 0; j < 4; ++j) sums[r][4 * lane + j] = part[j];
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t acc[8];
    xxh3::chain_rounds(sums, rounds, secret, acc);
    const xxh3::Hash128 h = xxh3::finish_long_summed(in, len, secret, acc, sums[rounds]);
    out[out_stride * row] = h.high;
    out[out_stride * row + 1] = h.low;
  }
}

}  // namespace

void detail::launch_digests(const BlockSpan* spans, int count, uint64_t block_elements,
                            uint64_t* out, uint64_t out_stride, cudaStream_t stream,
                            const char* fn) {
  detail::for_each_launch(
      spans, count, block_elements, fn, [&](const detail::SpanTable& table, unsigned blocks) {
        block_digests_kernel<<<blocks, kThreads, 0, stream>>>(table, out, out_stride);
        MTP_CUDA_CHECK(cudaGetLastError());
      });
}

void block_digests(const void* data, uint64_t nbytes, uint64_t block_bytes, uint64_t* out,
                   cudaStream_t stream, uint64_t out_stride) {
  if (!internal::check_block_digests("cuda::block_digests", data, nbytes, block_bytes, out,
                                     out_stride)) {
    return;
  }
  // One span of bytes: blocks of block_bytes one-byte elements.
  const BlockSpan span{data, static_cast<int64_t>(nbytes), 1, 0};
  detail::launch_digests(&span, 1, block_bytes, out, out_stride, stream, "cuda::block_digests");
}

void block_summaries(const BlockSpan* spans, int count, int64_t block_elements, int64_t* out,
                     cudaStream_t stream) {
  constexpr const char* kFn = "cuda::block_summaries";
  if (count < 0 || (count > 0 && spans == nullptr)) {
    throw std::invalid_argument(std::string(kFn) + ": " + std::to_string(count) +
                                " spans at a null or negative list");
  }
  bool any = false;
  for (int i = 0; i < count; ++i) {
    const BlockSpan& s = spans[i];
    const uint64_t bytes = static_cast<uint64_t>(block_elements > 0 ? block_elements : 0) *
                           static_cast<uint64_t>(s.element_size > 0 ? s.element_size : 0);
    internal::check_nonfinite_blocks(kFn, s.data, s.numel, s.element_size, block_elements, out,
                                     /*out_stride=*/5);
    internal::check_block_digests(kFn, s.data, static_cast<uint64_t>(s.numel) * s.element_size,
                                  bytes, out,
                                  /*out_stride=*/5);
    any = any || s.numel > 0;
  }
  if (!any) return;
  const auto n = static_cast<uint64_t>(block_elements);
  detail::launch_digests(spans, count, n, reinterpret_cast<uint64_t*>(out), 5, stream, kFn);
  detail::launch_nonfinite(spans, count, n, out + 2, 5, stream, kFn);
}

}  // namespace mtp::kernels::cuda
