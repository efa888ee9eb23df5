// File: harness/sim/simulate.h
//
// The pipeline cost simulator (issue 23): every pipeline rank plays its op order — the same
// schedule::rank_ops lists the executor runs — with each op's duration from its model chunk's
// measured node costs (sim/costs.h), a forward waiting for the previous stage's forward and a
// backward for the next stage's backward and its own forward, and every message between pipeline
// ranks delayed by the link (latency + bytes / bandwidth). Sends do not block the sender (Megatron
// posts isend/irecv and computes on). A combined 1F1B steady pair (schedule::ScheduleDef
// combined_steps) runs as one block that starts when both inputs are there and hands both outputs
// on at its end; with expert parallelism it lasts max(the two ops' compute, their all-to-alls):
// each microbatch's all-to-all hidden behind the other's compute, as the change's overlap intends.
//
// Context and expert parallelism (Parallelism): a CP rank computes s / CP of the sequence, so
// every node's measured time (at the whole sequence) is divided by CP (not the chunk op, which is
// host work per op); each attention layer adds its K and V all-gathers (forward) and
// reduce-scatters (backward) over the CP group, each ring step a message over the collective
// link. EP adds, per MoE layer, the token-count all-gather and the dispatch and combine
// all-to-alls (forward; the backward runs both all-to-alls again), uniform routing assumed:
// each rank sends (s / CP)·b·topk·h elements, 1 / EP of them to each member. Expert compute is
// not divided by EP: an EP rank's experts see topk·(s / CP)·b token rows, as all experts do
// without EP (calibrate times MoE layers at the experts per rank EP would give).
//
// Example:
//   std::vector<StageCost> sc = stage_costs(model, layout, costs, 2, parallelism);  // cp, ep
//   SimResult r = simulate(layout, sc, schedule_config, costs.link);
//   r.step_ms; r.ranks[p].idle_ms; r.rank_imbalance;
//
// Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"
#include "harness/sim/costs.h"

namespace mtp::sim {

/// The context- and expert-parallel sizes of the simulated run and the link their collectives
/// cross (1 = none; the link: the costs' pipeline link when unset).
struct Parallelism {
  int cp = 1;  ///< context-parallel size (model.seq_length a multiple of 2·cp)
  int ep = 1;  ///< expert-parallel size (num_moe_experts a multiple of ep)
  std::optional<Link> collective_link;
};

/// Milliseconds of a ring collective (all-gather or reduce-scatter) of `bytes` in all over `n`
/// ranks, or of an all-to-all of a rank's `bytes` to `n` members (pairwise): n − 1 messages of
/// bytes / n each, one after another; 0 for n = 1. Throws nothing.
double ring_collective_ms(const Link& link, int n, double bytes);

/// One model chunk's price for one microbatch.
struct StageCost {
  double forward_ms = 0.0;   ///< everything: compute, chunk op and collectives
  double backward_ms = 0.0;  ///< everything: compute, chunk op and collectives
  /// The CP all-gathers / reduce-scatters and EP all-to-alls (and count all-gathers) within
  /// forward_ms / backward_ms.
  double forward_collective_ms = 0.0;
  double backward_collective_ms = 0.0;
  /// The EP all-to-alls within the collectives: what a combined 1F1B pair hides behind the other
  /// microbatch's compute.
  double forward_a2a_ms = 0.0;
  double backward_a2a_ms = 0.0;
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

/// The most ops (2 · stages · M) one simulation plays: ~140 bytes and ~0.3 µs each, so 2^24 ops
/// take ~2.4 GB and a few seconds (DeepSeek-V3 at PP16 VPP2, M 256, is 16,384 ops).
inline constexpr int64_t kMaxSimulatedOps = int64_t{1} << 24;

/// `layout_text` for `model` (its N and D) and P (`split`: R7 as candidate/split/ reads it), with
/// the schedule named `schedule_name` ("" = derived from P and V), M microbatches and group size N
/// (0 = P). Throws InputError (LayoutError, ScheduleError) naming the rule broken, and when the
/// plan has more than kMaxSimulatedOps ops.
SimulationPlan plan_simulation(const config::ModelConfig& model, const std::string& layout_text,
                               int pipeline_size, int num_microbatches,
                               const std::string& schedule_name, int group_size, bool split);

/// The price of every stage of `layout` for `model` with `costs`: the embedding, each decoder layer
/// (dense or MoE by model.is_moe_layer), each MTP depth (its block, dense or MoE by
/// model.mtp_layer_is_moe(), plus its head and loss in the loss stage), the final layernorm where
/// the layout owns it, the LM head with `L`, and one chunk op for every stage (even an empty
/// one); under `par` the node times divided by CP and the collectives added (file comment).
/// `element_bytes` sizes activations, messages and collectives (2 for bf16). Throws InputError
/// when the costs lack a node the model uses, or cp / ep do not fit the model
/// (config::context_parallel_misfit, expert_parallel_misfit) or are < 1.
std::vector<StageCost> stage_costs(const config::ModelConfig& model,
                                   const layout::PipelineLayout& layout, const CostTable& costs,
                                   uint64_t element_bytes, const Parallelism& par = {});

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
  double busy_ms = 0.0;  ///< sum of its ops' durations (a combined pair's block counted once)
  double idle_ms = 0.0;  ///< step_ms − busy_ms (the bubble as this rank sees it)
  uint64_t peak_activation_bytes = 0;  ///< most saved activations at any point of its op order
  int peak_in_flight = 0;              ///< most microbatch-chunks forwarded and not yet backwarded
  /// Σ over its stages of M·(forward + backward), all-to-alls whole: a combined 1F1B pair hides
  /// part of them, so with EP the work can exceed the step (and rank_imbalance is the stages')
  double work_ms = 0.0;
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
