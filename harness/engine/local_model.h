// File: harness/engine/local_model.h
//
// What one rank holds: its model chunks (one per virtual stage of its pipeline rank), their
// parameters, and per chunk the contiguous main-grad buffer Megatron-LM's DDP keeps
// (buffer_layout.h): every parameter's main grad is a view into its chunk's buffer.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/engine/buffer_layout.h"
#include "harness/engine/chunk.h"
#include "harness/engine/placement.h"
#include "harness/engine/plan.h"
#include "harness/engine/topology.h"

namespace mtp::engine {

/// One parameter tensor this rank holds: one chunk's copy of a model parameter.
struct LocalParam {
  std::string name;      ///< global name
  size_t index = 0;      ///< in ParamPlacement::params (canonical order)
  int stage = 0;         ///< stage index of the chunk holding it
  size_t buffer = 0;     ///< index of its chunk's ChunkBuffer in LocalModel::buffers
  bool owner = false;    ///< its stage owns the parameter (placement stages[0]): the recorded copy
  at::Tensor weight;     ///< the chunk's leaf tensor (requires_grad)
  at::Tensor main_grad;  ///< view into the chunk's grad buffer, same shape as weight
  /// The fp32 master weight of a bf16 parameter (Megatron's Float16OptimizerWithFloat16Params:
  /// main_param = param.detach().clone().float()); undefined when the weight is its own master.
  at::Tensor master;
  /// Canonical accumulation: this copy's gradient contributions of the step, each under its slot
  /// (global microbatch · ChunkProgram::kUseSlots + use), in the order they were made.
  std::vector<std::pair<int64_t, at::Tensor>> contributions;
};

/// One chunk's main-grad buffer.
struct ChunkBuffer {
  int stage = 0;
  /// Holds the chunk's routed-expert parameters only (expert parallelism: Megatron's
  /// expert_parallel_buffers, reduced over the expert-data-parallel group); the chunk's other
  /// parameters are in its dense buffer.
  bool expert = false;
  BufferLayout layout;
  at::Tensor grad_data;  ///< [layout.numel], model dtype, zero padding
  /// The data-parallel rank's shard of each bucket ([begin, end) buffer indices): what its
  /// reduce-scatter reduces and its distributed optimizer updates; the whole bucket without the
  /// distributed optimizer.
  std::vector<std::pair<int64_t, int64_t>> shards;
};

class LocalModel {
 public:
  /// Builds the chunks of `rank`'s pipeline rank (stages p, p + P, …) from `init` and lays out
  /// their buffers as Megatron's DDP does for the plan (buffer_layout.h): registration order;
  /// with the distributed optimizer padded and sharded over DP, the word-embedding copies marked
  /// shared_embedding when P > 1 and they are shared (tied head or MTP); bucket_size =
  /// variant.ddp_bucket_size on pipeline rank 0's first chunk only. Parameters are listed in
  /// canonical order (placement index, then stage).
  /// `dtype` is the parameters', `main_dtype` the main grads' and master weights' (fp32 for bf16
  /// parameters, else `dtype`). Masters are the parameters cast to `main_dtype` (Megatron makes
  /// its fp32 main params from the bf16 params), or with `masters_from_init` (a resumed run, whose
  /// `init` holds the recorded masters) `init` cast to `main_dtype`. groups.cp: the rank's
  /// context-parallel group (null = CP 1; engine/chunk.h build_chunk); with CP the buffers are
  /// sharded over the gradient group (DP·CP, Megatron's intra_dp_cp_group). groups.ep: the
  /// rank's expert-parallel group (null = EP 1): the chunks then hold this EP rank's routed
  /// experts only, in an expert buffer of their own after each chunk's dense buffer.
  LocalModel(const RunPlan& plan, const Implementation& impl, const InitialWeights& init,
             const ParamPlacement& placement, const Topology& topology, int rank,
             at::ScalarType dtype, at::ScalarType main_dtype, bool masters_from_init,
             at::Device device, const model::ParallelGroups& groups = {});

  std::vector<std::unique_ptr<ModelChunk>> chunks;  ///< by virtual stage
  std::vector<const ModelChunk*> chunks_by_stage;   ///< every stage index; null where not local
  std::vector<LocalParam> params;
  /// Per local chunk in virtual stage order: its dense buffer, then (expert parallelism, when
  /// the chunk holds routed experts) its expert buffer.
  std::vector<ChunkBuffer> buffers;

  /// Whether main grads are accumulated after every backward pass (bf16 parameters with fp32
  /// main grads: Megatron's DDP backward hook, gradient-accumulation fusion off, adds
  /// param.grad into param.main_grad and drops param.grad each time autograd accumulates it) or
  /// loaded once after the step's backward passes (fp32/fp64: autograd accumulates .grad across
  /// the microbatches in microbatch order, and load_main_grads copies it).
  bool accumulates_per_backward() const { return per_backward_; }

  /// Drops every parameter's .grad before a step's backward passes; in per-backward mode also
  /// zeroes the main grads.
  void start_step();
  /// Per-backward mode: for the parameters of the chunk of `stage`, main_grad += .grad (bf16 into
  /// fp32) and .grad is dropped. Call after every backward call of that chunk (a node's backward
  /// in combined 1F1B).
  void accumulate_main_grads(int stage);
  /// Copies each parameter's accumulated .grad into its main grad (zeros where backward left no
  /// grad); the buffers' padding stays zero. A no-op in per-backward mode.
  void load_main_grads();
  /// Planted bug kGradsZeroedBetweenMicrobatches (config/fault.h): drops .grad and zeroes the
  /// main grads of the parameters of `stage`'s chunk, as a zero_grad inside the microbatch loop
  /// would. Never called by a correct run.
  void zero_stage_grads(int stage);
  /// The local copy of placement parameter `index` on `stage`, or null.
  LocalParam* find(size_t index, int stage);
  /// [begin, end) of `p`'s elements inside its chunk buffer's shards of this data-parallel rank,
  /// relative to the parameter's first element (all of it without the distributed optimizer).
  /// A parameter lies in one bucket, so this is one range (possibly empty).
  std::pair<int64_t, int64_t> owned_range(const LocalParam& p) const;

 private:
  bool per_backward_ = false;
};

}  // namespace mtp::engine
