// File: harness/engine/buffer_layout.h
//
// Megatron-LM's contiguous parameter-and-gradient buffer of one model chunk, as laid out by
// _ParamAndGradBuffer.__init__ (megatron/core/distributed/param_and_grad_buffer.py, read at
// commit d98e8a64dd) for the chunk's DistributedDataParallel wrapper
// (distributed_data_parallel.py):
//
//  - Parameters enter in reverse registration order (`params[::-1]`, "roughly backprop order");
//    registration order is the chunk's named_parameters() order (megatron_registration_order).
//  - With the distributed optimizer each parameter starts at a multiple of 64 elements
//    (_pad_start_of_param_if_needed), and each bucket ends at a multiple of lcm(DP, 128), or of
//    lcm(DP, 128, 2^16) with pad_buckets_for_high_nccl_busbw (_pad_end_of_bucket_if_needed).
//    Without it nothing is padded.
//  - A bucket closes once it holds ≥ bucket_size elements. bucket_size is None (one bucket)
//    unless overlap_grad_reduce is on, and always None on pipeline ranks > 0 and for model chunks
//    after the first (DDP: `if disable_bucketing or pp_rank > 0`; training.py get_model passes
//    disable_bucketing for chunk index > 0).
//  - With the distributed optimizer a `shared_embedding` parameter (the word-embedding copies of
//    a pipeline with P > 1, language_module.py setup_embeddings_and_output_layer) gets a bucket
//    of its own (_does_param_require_new_bucket), so every copy is sharded alike over DP.
//  - Data-parallel rank r owns the r-th of DP equal parts of every bucket (shard_buffer), the
//    range its reduce-scatter reduces and its optimizer updates.
// Expert weights stay in this dense buffer: with expert_model_parallel_size = 1 Megatron sets
// allreduce = True on them (tensor_parallel/layers.py, use_expert_pgs is false).
//
// Example (DP = 2, distributed optimizer, registration order a[100], b[10]):
//   b at [0, 10), a at [64, 164), one bucket [0, 256) (lcm(2, 128) = 128), shards [0, 128) and
//   [128, 256).
//
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mtp::engine {

/// A parameter of a chunk as the buffer sees it.
struct BufferParamSpec {
  std::string name;
  int64_t numel = 0;
  bool shared_embedding = false;  ///< Megatron's `shared_embedding` attribute
};

/// Where one parameter sits.
struct BufferParamRange {
  std::string name;
  int64_t start = 0, end = 0;  ///< [start, end) in the buffer
  int bucket = 0;
};

struct BufferBucket {
  int64_t start = 0, end = 0;       ///< [start, end) in the buffer, end padded
  int64_t numel_unpadded = 0;       ///< last parameter's end − start
  std::vector<std::string> params;  ///< buffer order
};

struct BufferOptions {
  int data_parallel_size = 1;
  bool distributed_optimizer = false;
  int64_t bucket_size = 0;  ///< elements; 0 = None (one bucket)
  bool pad_buckets_for_high_nccl_busbw = false;
};

struct BufferLayout {
  std::vector<BufferParamRange> params;  ///< buffer order
  std::vector<BufferBucket> buckets;
  int64_t numel = 0;           ///< with padding
  int64_t numel_unpadded = 0;  ///< Σ over buckets of numel_unpadded
  BufferOptions options;

  /// [begin, end) of data-parallel rank `dp`'s shard of bucket `bucket` (buffer indices). Without
  /// the distributed optimizer the whole bucket.
  std::pair<int64_t, int64_t> shard(int bucket, int dp) const;
  /// The range of `name`. Throws InternalError when absent.
  const BufferParamRange& range(const std::string& name) const;
  /// Whether `name` is in this buffer.
  bool contains(const std::string& name) const;
};

/// The layout Megatron's _ParamAndGradBuffer builds for `params` (registration order).
/// Throws InternalError for DP < 1, a negative bucket size or duplicate names.
BufferLayout megatron_buffer_layout(const std::vector<BufferParamSpec>& params,
                                    const BufferOptions& options);

/// A chunk's parameter names in Megatron's registration order (named_parameters()), given in the
/// harness's canonical order (model/params.h). They differ in one place: Megatron's Attention
/// builds linear_proj before SelfAttention builds linear_qkv (megatron/core/transformer/
/// attention.py), so `…self_attention.linear_proj.weight` precedes `…linear_qkv.weight`.
/// Everything else (embedding, decoder layers, final layernorm, MTP enorm, hnorm, eh_proj,
/// transformer layer, final layernorm, output layer; router, experts, shared experts) is
/// registered in canonical order (gpt_model.py, transformer_layer.py, moe_layer.py,
/// multi_token_prediction.py).
std::vector<std::string> megatron_registration_order(std::vector<std::string> canonical);

}  // namespace mtp::engine
