// File: harness/sim/simulate.h
//
// The pipeline cost simulator (issue 23): every pipeline rank plays its op order — the same
// schedule::rank_ops lists the executor runs — with each op's duration from its model chunk's
// measured node costs (sim/costs.h), a forward waiting for the previous stage's forward and a
// backward for the next stage's backward and its own forward, and every message between pipeline
// ranks delayed by the link (latency + bytes / bandwidth). Sends do not block the sender (Megatron
// posts isend/irecv and computes on). A combined 1F1B steady pair (schedule::ScheduleDef
// combined_steps) runs as one block of forward + backward time that starts when both inputs are
// there and hands both outputs on at its end (no all-to-all is hidden: EP = 1).
//
// Example:
//   std::vector<StageCost> sc = stage_costs(model, layout, costs, 2);
//   SimResult r = simulate(layout, sc, schedule_config, costs.link);
//   r.step_ms; r.ranks[p].idle_ms; r.rank_imbalance;
//
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"
#include "harness/sim/costs.h"

namespace mtp::sim {

/// One model chunk's price for one microbatch.
struct StageCost {
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  uint64_t activation_bytes = 0;  ///< saved for backward (sim/activation.h)
  /// Bytes of the message to the next stage (and of the gradient back): s·b·h elements per hidden
  /// state carried, 1 + the MTP depths computed in this or an earlier stage when a later stage
  /// still needs them (Megatron's standalone MTP sends cat(h0 … hk) on to the loss stage).
  uint64_t message_bytes = 0;
  bool has_mtp = false;
  bool has_loss = false;
  bool has_embedding = false;
  /// "E t0 t1 m1", what the stage holds (timeline labels, tables).
  std::string contents;
};

/// A layout string made ready to simulate: the layout for the model and P, and its schedule.
struct SimulationPlan {
  layout::PipelineLayout layout;
  schedule::ScheduleConfig schedule;
};

/// `layout_text` for `model` (its N and D) and P (`split`: R7 as split/ reads it), with the
/// schedule named `schedule_name` ("" = derived from P and V), M microbatches and group size N
/// (0 = P). Throws InputError (LayoutError, ScheduleError) naming the rule broken.
SimulationPlan plan_simulation(const config::ModelConfig& model, const std::string& layout_text,
                               int pipeline_size, int num_microbatches,
                               const std::string& schedule_name, int group_size, bool split);

/// The price of every stage of `layout` for `model` with `costs`: the embedding, each decoder layer
/// (dense or MoE by model.is_moe_layer), each MTP depth (its block, dense or MoE by
/// model.mtp_layer_is_moe(), plus its head and loss in the loss stage), the final layernorm where
/// the layout owns it, the LM head with `L`, and one chunk op for every stage (even an empty
/// one). `element_bytes` sizes activations and messages (2 for bf16). Throws InputError when the
/// costs lack a node the model uses.
std::vector<StageCost> stage_costs(const config::ModelConfig& model,
                                   const layout::PipelineLayout& layout, const CostTable& costs,
                                   uint64_t element_bytes);

/// One op as it ran.
struct SimOp {
  int pipeline_rank = 0;
  int stage = 0;
  int microbatch = 0;
  schedule::OpType type = schedule::OpType::kForward;
  bool combined = false;  ///< part of a combined 1F1B block (same start and end as its partner)
  double start_ms = 0.0;
  double end_ms = 0.0;
};

/// One pipeline rank over the step.
struct RankTime {
  double busy_ms = 0.0;                ///< sum of its ops' durations
  double idle_ms = 0.0;                ///< step_ms − busy_ms (the bubble as this rank sees it)
  uint64_t peak_activation_bytes = 0;  ///< most saved activations at any point of its op order
  int peak_in_flight = 0;              ///< most microbatch-chunks forwarded and not yet backwarded
  double work_ms = 0.0;                ///< Σ over its stages of M·(forward + backward)
};

struct SimResult {
  double step_ms = 0.0;  ///< the last op's end (every rank starts at 0)
  std::vector<RankTime> ranks;
  std::vector<SimOp> ops;  ///< per rank in its op order, ranks ascending
  /// max over ranks of work_ms / mean over ranks (1 = perfectly balanced).
  double rank_imbalance = 1.0;
  int most_loaded_rank = 0;
  int most_loaded_stage = 0;     ///< the stage with the largest forward + backward
  double bubble_fraction = 0.0;  ///< Σ idle / (P · step_ms)
};

/// Plays `schedule` (its P, V, M, N; P and V must match `layout`) over `stages` (one per stage of
/// `layout`) with messages over `link`. Throws InputError when P or V differ from the layout,
/// the schedule is invalid (ScheduleError's message), or the op orders deadlock (naming each
/// blocked rank and its next op), which the schedules never do.
SimResult simulate(const layout::PipelineLayout& layout, const std::vector<StageCost>& stages,
                   const schedule::ScheduleConfig& schedule, const Link& link);

}  // namespace mtp::sim
