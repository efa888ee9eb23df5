// File: harness/engine/plan.h
//
// A variant resolved once, before anything is built: the model with the variant's overrides,
// the validated layout and schedule, the topology's sizes and every derived setting. The CLI
// validates a whole scenario by planning each variant, prints the plan's facts, and hands the
// same plan to run_variant (architecture.md §3).
//
// Example:
//   RunPlan plan = plan_variant(scenario.model, scenario.training, variant, *impl);
//   plan.layout.virtual_size, schedule::schedule_kind_name(plan.schedule.kind), plan.clip_grad
#pragma once

#include <cstdint>

#include "harness/config/model_config.h"
#include "harness/config/run_config.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"

namespace mtp::engine {

class Implementation;

struct RunPlan {
  config::ModelConfig model;  ///< config::variant_model: the scenario's, with overrides
  config::TrainingConfig training;
  config::VariantSpec variant;
  layout::PipelineLayout layout;  ///< validated, and accepted by the implementation
  schedule::ScheduleConfig schedule;
  double clip_grad = 0.0;        ///< the variant's, else the training's; 0 = off
  int64_t num_microbatches = 1;  ///< M per step and data-parallel rank
  config::RecordMode record_mode = config::RecordMode::kAuto;  ///< the variant's, else training's

  int pipeline_size() const { return layout.pipeline_size; }
  int data_parallel_size() const { return variant.data_parallel_size; }
  int context_parallel_size() const { return variant.context_parallel_size; }
  int expert_parallel_size() const { return variant.expert_parallel_size; }
  /// P · DP ranks.
  int world_size() const {
    return layout.pipeline_size * variant.data_parallel_size * variant.context_parallel_size;
  }
  /// N as Megatron uses it (interleaved and combined schedules: N, default P); 0 otherwise.
  int microbatch_group_size() const;
  /// The parallel sizes beyond P and DP that are not 1, for one-line summaries: "", ", CP 2",
  /// ", EP 2", ", CP 2, EP 4".
  std::string extra_parallel_sizes() const;
};

/// The layout a variant runs: its layout string for P, or Megatron's even split when it has none.
/// Throws LayoutError.
layout::PipelineLayout variant_layout(const config::VariantSpec& variant,
                                      const config::ModelConfig& model);

/// The schedule a variant runs (explicit, or derived from P and V: none, 1f1b, interleaved).
/// Throws ScheduleError / InputError when Megatron would reject it (microbatch_group_size or
/// overlap_p2p with a schedule that has no use for them).
schedule::ScheduleConfig variant_schedule(const config::VariantSpec& variant,
                                          const layout::PipelineLayout& layout,
                                          int64_t num_microbatches);

/// Resolves and validates everything about `variant` that does not need a tensor. Throws
/// InputError (LayoutError, ScheduleError) naming the broken rule: bad overrides, a layout the
/// implementation rejects, a schedule Megatron rejects, combined 1F1B with D > 1, steps or M < 1,
/// DP < 1, a negative ddp_bucket_size, both init_from and resume_from, a resume_from step not
/// before steps.
RunPlan plan_variant(const config::ModelConfig& model, const config::TrainingConfig& training,
                     const config::VariantSpec& variant, const Implementation& impl);

}  // namespace mtp::engine
