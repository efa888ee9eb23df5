// File: harness/engine/resource_estimate.h
//
// What a variant will need before anything is allocated: parameter, gradient, optimizer and
// activation memory over every rank, and the record's size on disk. `check` and `run` refuse a
// variant whose estimate exceeds the memory the device has (or --max-memory) or the free disk
// space, with exit 2 and the estimate, instead of growing for minutes and failing with
// std::bad_alloc or the OOM killer.
//
// Example:
//   ResourceEstimate e = estimate_resources(plan, impl);
//   require_resources(plan, e, /*memory_limit=*/available_memory_bytes(), "CPU memory",
//                     /*disk_free=*/fs::space(out).available, where);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/engine/placement.h"
#include "harness/engine/plan.h"
#include "harness/record/record.h"  // record::Storage

namespace mtp::engine {

/// Bytes one variant needs. Memory terms are sums over every rank of the variant (P · DP ranks,
/// which share one device when they run as threads); `per_rank_bytes` has each rank's share.
struct ResourceEstimate {
  uint64_t parameters = 0;    ///< unique parameters, MTP depths included
  uint64_t weight_bytes = 0;  ///< every parameter copy of every rank, in the training dtype
  /// Main-grad buffers (fp32 for bf16, else the training dtype) plus autograd's .grad tensors
  /// (training dtype).
  uint64_t grad_bytes = 0;
  /// Adam's exp_avg and exp_avg_sq (main-grad dtype; sharded over DP with distributed Adam) and
  /// bf16 runs' fp32 master weights.
  uint64_t optimizer_bytes = 0;
  /// Activations saved for backward at the schedule's peak: per rank, the most microbatches any
  /// point of its op order (schedule::rank_ops) has in flight per model chunk, times the chunk's
  /// saved activations per microbatch (see estimate_resources), plus per rank the transient
  /// workspace of one attention call (sim::attention_workspace_bytes: the harness kernel's
  /// [b·a, s, s] scratch).
  uint64_t activation_bytes = 0;
  /// Host memory of the run itself: the initial weights as float64 values and one step's record
  /// staging (the gathered grads and weights). Counted in memory_bytes() for CPU runs only.
  uint64_t staging_bytes = 0;
  bool staging_on_device = false;  ///< the plan runs on the CPU, so staging shares its memory
  uint64_t record_bytes = 0;       ///< the record file after every step (HDF5 overhead excluded)
  /// Memory of transport rank r = g + DP·CP·pp (g: its gradient-group index), same terms.
  std::vector<uint64_t> per_rank_bytes;

  /// weight + grad + optimizer + activation bytes, plus staging_bytes on the CPU.
  uint64_t memory_bytes() const;
  /// "2.1 GiB of memory (weights 1.0 GiB, grads 0.5 GiB, optimizer 0.4 GiB, activations
  /// 0.2 GiB, staging 0.1 GiB; 1000 parameters); record 3.0 MiB".
  std::string describe() const;
};

/// Estimates `plan` with `impl`'s placement of parameters (Implementation::stage_param_names).
/// Saved activations per microbatch, in elements of the training dtype unless noted (s, b, h,
/// F, a heads, V; after Korthikanti et al. 2022, "Reducing Activation Recomputation", §4.1, for
/// this harness's ops: pre-norm, SwiGLU, unfused softmax attention):
///   decoder layer   (13·h + 3·F_eff)·s·b, plus 2·a·s²·b scores and probabilities in
///                   max(dtype, fp32) (flash attention: a·s·b fp32 log-sum-exp instead);
///                   F_eff = F for a dense MLP, topk·F_moe + F_shared (+ E router scores) for MoE
///   output head     s·b·V logits in the training dtype plus 2·s·b·V in fp32 (cast and
///                   log-softmax), plus 2·s·b·h for the final layernorm (LM head and every MTP
///                   depth)
///   MTP depth       6·s·b·h (two norms, the 2h concatenation, eh_proj) plus its layer and head
///   embedding       s·b·h
/// Allocator slack, transient buffers and LibTorch itself (~0.2 GiB) come on top. Measured on the
/// CPU (README.md): 4 layers, H 1024, F 2816, V 32768, s 256, M 2, D 1, fp32 at P = 1: estimate
/// 4.8 GiB, peak RSS 4.6 GiB. Throws nothing for a valid plan.
ResourceEstimate estimate_resources(const RunPlan& plan, const Implementation& impl);

/// What each step of `plan`'s record holds (record/schema.h): its parameters in canonical order,
/// D, K = M · DP microbatches of b · s tokens, the main dtype (fp32 for bf16 and fp32 runs, fp64
/// for fp64), the bf16 model weights, the optimizer state when saved. Throws nothing.
/// With `placement` and training.record_copies, also the copies (param_copies). Throws nothing.
record::StepContents step_contents(const RunPlan& plan, const ParamPlacement* placement = nullptr);

/// Bytes of one step's grad, weight (+ bf16 model_weight, + optimizer state when saved) tensors
/// in a full record: what RecordMode::kAuto weighs against config::kAutoFullStepBytes.
uint64_t step_tensor_bytes(const RunPlan& plan);

/// How the grad, weight, model_weight and optimizer tensors of a step that is not one of
/// training.dump_steps are kept: full when the plan's record mode is full, or when it is auto and
/// a step's tensors (step_tensor_bytes) fit config::kAutoFullStepBytes; digest-only otherwise.
/// It walks every parameter (O(parameters)): compute it once per plan, not per tensor (with 1024
/// experts per layer, once per tensor made a step of a tiny model take minutes).
record::Storage default_step_storage(const RunPlan& plan);

/// How step `step`'s tensors are kept: full for one of training.dump_steps, else
/// `default_storage` (default_step_storage(plan)). Batches and losses are always kept in full.
inline record::Storage step_storage(const RunPlan& plan, int64_t step,
                                    record::Storage default_storage) {
  return plan.training.dump_steps.count(step) ? record::Storage::kFull : default_storage;
}

/// "1.5 GiB", "12.0 MiB", "900 B".
std::string format_bytes(uint64_t bytes);

/// Throws InputError starting with `where` (e.g. "scenario.toml:40:1: variant \"x\"") when the
/// variant's memory (all ranks when `all_ranks_share_memory`, else its largest rank) exceeds
/// `memory_limit` bytes of `memory_name` ("CPU memory available", "--max-memory", "free memory
/// of cuda:0"), or its record exceeds `disk_free` bytes; the message gives the estimate and the
/// limit, then `remedy` in parentheses (what the user can change). A limit of 0 is not checked.
void require_resources(const ResourceEstimate& estimate, bool all_ranks_share_memory,
                       uint64_t memory_limit, const std::string& memory_name, uint64_t disk_free,
                       const std::string& where,
                       const std::string& remedy =
                           "reduce hidden_size, seq_length, "
                           "micro_batch_size or the number of layers, or "
                           "raise --max-memory");

}  // namespace mtp::engine
