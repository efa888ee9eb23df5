// File: harness/config/run_config.h
//
// What one training run needs besides the model: the optimizer and step settings every variant
// of a scenario shares, and the variant (implementation, layout, schedule, execution) that sets
// it apart from its siblings. Plain data, parsed once from a scenario (harness/scenario) and
// resolved into a run plan by the engine (harness/engine/plan.h). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "harness/config/enums.h"
#include "harness/config/model_config.h"
#include "harness/config/record_ref.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"

namespace mtp::config {

/// Training settings shared by every variant of a scenario (Megatron-LM argument names).
struct TrainingConfig {
  int64_t steps = 3;  ///< optimizer steps
  /// M: microbatches per step and data-parallel rank. Ignored when global_batch_size is set.
  int64_t num_microbatches = 8;
  /// Megatron's --global-batch-size in samples: when set, each variant trains
  /// M = global_batch_size / (micro_batch_size · DP) microbatches per data-parallel rank, so
  /// variants of different DP see the same global batch.
  std::optional<int64_t> global_batch_size;
  uint64_t seed = 1234;  ///< initial weights (per-parameter generators)
  double lr = 1e-3;      ///< Adam learning rate (constant)
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  double weight_decay = 0.0;      ///< decoupled (AdamW), as Megatron's Adam
  double clip_grad = 0.0;         ///< max global grad norm; 0 = clipping off (the default)
  DType dtype = DType::kFloat32;  ///< parameters, activations and main grads
  Device device = Device::kCpu;
  /// Every initial weight from /steps/<step>/weight of a record, by name, instead of from `seed`
  /// ([training] init_from = "REC.h5[:STEP]", --init-from; engine/checkpoint.h).
  std::optional<RecordRef> init_from;
  /// Continue a run: the weights and the optimizer state of /steps/<step> of a record, then steps
  /// step + 1 … `steps` (--resume REC.h5:STEP; engine/checkpoint.h). Excludes init_from.
  std::optional<RecordRef> resume_from;
  /// Write each step's optimizer state (Adam exp_avg, exp_avg_sq, step count) to the record's
  /// "optimizer" group ([training] save_optimizer_state, --save-optimizer-state), so that a run
  /// can resume from any step.
  bool save_optimizer_state = false;
  /// Write every parameter copy other than the recorded one (data-parallel replicas, the
  /// word-embedding copies of the other stages) to the record's "copies" group at the start step
  /// and after every step ([training] record_copies, --record-copies; record/schema.h
  /// copy_name). The record is then the evidence the `replicas` expectation judges, and the run
  /// does not stop at a copy that drifted (engine/replica_check.h).
  bool record_copies = false;
  /// What the record keeps of grads, weights and optimizer state ([training] record, --record;
  /// a variant's `record` overrides it).
  RecordMode record = RecordMode::kAuto;
  /// Steps kept in full whatever the mode ([training] dump_steps, --dump-steps).
  std::set<int64_t> dump_steps;
};

/// A step's grad + weight (+ model_weight, optimizer) bytes up to which RecordMode::kAuto keeps
/// full tensors: 64 MiB (the default scenario writes about 3 MiB per step, the 185M-parameter
/// "small" model about 2 GiB).
inline constexpr uint64_t kAutoFullStepBytes = uint64_t{64} << 20;

/// One variant of a scenario.
struct VariantSpec {
  std::string name;  ///< unique in the scenario, [A-Za-z0-9_.-]+
  Implementation implementation = Implementation::kReference;
  std::string layout;     ///< Megatron layout string; "" = default even split
  int pipeline_size = 1;  ///< P
  int virtual_size = 1;   ///< V when `layout` is empty (else derived from the layout)
  /// DP: data-parallel replicas of the pipeline; each trains on its own M microbatches of the
  /// global batch (DP·M microbatches per step).
  int data_parallel_size = 1;
  /// CP: context-parallel ranks of each replica; each holds s/CP positions of every sequence
  /// (model/context_parallel.h). CP > 1: seq_length a multiple of 2·CP, dense, attention
  /// "unfused", accumulation "megatron" (engine/plan.cc check_context_parallel).
  int context_parallel_size = 1;
  /// EP: expert-parallel ranks; no ranks are added: each MoE layer's routed experts are split
  /// over EP members of the gradient group (engine/topology.h, model/expert_parallel.h).
  /// EP > 1: an MoE model, EP dividing num_moe_experts and dp · cp, optimizer "adam",
  /// accumulation "megatron" (engine/plan.cc check_expert_parallel).
  int expert_parallel_size = 1;
  /// Explicit schedule; empty = derived (P = 1: none, V = 1: 1f1b, else interleaved).
  std::optional<schedule::ScheduleKind> schedule;
  int microbatch_group_size = 0;                  ///< N for interleaved; 0 = P
  std::optional<double> clip_grad;                ///< overrides TrainingConfig::clip_grad
  std::optional<double> mtp_loss_scaling_factor;  ///< overrides the model's λ (negative controls)
  /// Overrides the model's D (0: the same model without MTP; its parameters are the shared ones).
  std::optional<int64_t> mtp_num_layers;
  int64_t transport_max_delay_us = 0;  ///< random message delays (in-process transport)
  bool overlap_p2p = false;            ///< post receives one op ahead (Megatron overlap_p2p_comm)
  /// Run each microbatch as one replayed CUDA graph (engine/microbatch_graph.h): CUDA, bf16,
  /// one stage, harness kernels, dense, DP = 1. Changes no value (records bitwise equal).
  bool cuda_graphs = false;
  std::optional<Kernels> kernels;                     ///< overrides the model's kernels
  std::optional<AttentionBackend> attention_backend;  ///< overrides the model's
  std::optional<bool> untie_embeddings;               ///< overrides the model's untie_embeddings
  std::optional<bool> calculate_per_token_loss;       ///< overrides the model's (loss normaliser)
  Optimizer optimizer = Optimizer::kAdam;
  /// How the word-embedding copies stay equal after the optimizer step.
  EmbeddingCopyUpdate embedding_copy_update = EmbeddingCopyUpdate::kReplicated;
  /// Megatron's --ddp-bucket-size in elements (buckets of the main-grad buffer of the first
  /// pipeline rank's first model chunk; Megatron disables bucketing elsewhere); 0 = one bucket
  /// (Megatron's default without --overlap-grad-reduce).
  int64_t ddp_bucket_size = 0;
  std::optional<RecordMode> record;  ///< overrides TrainingConfig::record
  /// A planted bug (config/fault.h) in this variant's run; only in scenarios that declare
  /// fault_injection. Sets ModelConfig::inject.
  std::optional<Fault> inject;
  /// Sets ModelConfig::accumulation ("megatron" when absent).
  std::optional<Accumulation> accumulation;
  /// A resumed variant (scenario key `resume = "VARIANT:STEP"`): variant `resume_of` (an earlier
  /// one, whose settings this one takes) continued from its own record at `resume_step`, with
  /// its weights and optimizer state (training.resume_from, set when that record exists).
  std::string resume_of;  ///< "" = not resumed
  int64_t resume_step = 0;
};

/// R7 as the implementation reads it (layout/layout.h MtpRule): candidate/split/ spreads the MTP
/// depths over consecutive stages, reference/ and candidate/ need them in one stage.
inline layout::MtpRule mtp_rule(Implementation impl) {
  return impl == Implementation::kSplit ? layout::MtpRule::kSplit : layout::MtpRule::kOneStage;
}

/// The model `variant` trains: `model` with the variant's overrides (mtp_loss_scaling_factor,
/// kernels, untie_embeddings, calculate_per_token_loss, inject, accumulation). Not validated.
ModelConfig variant_model(const ModelConfig& model, const VariantSpec& variant);

/// clear_model_overrides: removes from `variant` every override of the model variant_model
/// would apply that changes the model's arithmetic (λ, D, kernels, attention_backend,
/// untie_embeddings, calculate_per_token_loss), so that the variant trains the model as given
/// elsewhere (replay --variant-like: the record's). The planted bug and the accumulation stay.
void clear_model_overrides(VariantSpec& variant);

/// M for `variant`: training.num_microbatches, or global_batch_size / (micro_batch_size · DP).
/// Throws InputError when the global batch does not divide (Megatron's rule) or M < 1.
int64_t variant_num_microbatches(const TrainingConfig& training, const ModelConfig& model,
                                 const VariantSpec& variant);

}  // namespace mtp::config
