// File: harness/schedule/schedule.h
//
// Pipeline schedules as pure op-list generators: for one pipeline rank, the ordered list of
// forward and backward steps of (model chunk, microbatch). No tensors, no communication: the
// executor turns each op into receive → compute → send. Source: Megatron-LM
// megatron/core/pipeline_parallel/schedules.py (spec megatron_mtp_standalone.md §4.3–4.5).
//
// Example (spec §4.5, P=2 V=2 M=4 N=2, rank 1):
//   format_ops(rank_ops({ScheduleKind::kInterleaved, 2, 2, 4, 2}, 1)) ==
//   "F0.0 F0.1 (F1.0 B1.0) (F1.1 B1.1) (F0.2 B0.0) (F0.3 B0.1) (F1.2 B1.2) (F1.3 B1.3) B0.2 B0.3"
//
// Torch-free.
#pragma once

#include <string>
#include <vector>

#include "harness/common/error.h"
#include "harness/schedule/node_kind.h"

namespace mtp::schedule {

/// A schedule configuration that Megatron rejects. what() names the rule and the values.
class ScheduleError : public InputError {
 public:
  explicit ScheduleError(const std::string& msg) : InputError(msg) {}
};

enum class ScheduleKind {
  kNoPipelining,  ///< P = 1, V = 1: F(mb) then B(mb) for mb = 0..M−1 (spec §4.3)
  kOneFOneB,      ///< non-interleaved 1F1B, V = 1 (spec §4.4): W_r = min(P−r−1, M)
  kInterleaved,   ///< interleaved 1F1B (spec §4.5): W_r = min(2(P−r−1) + (V−1)·N, M·V)
  /// Combined 1F1B ("EP A2A overlap", spec §4.6, Megatron combined_1f1b.py): the interleaved
  /// table with one more warm-up forward, W_r = min(2(P−r−1) + (V−1)·N + 1, M·V), each steady
  /// (F, B) pair run as one combined step; with P = 1: F0, (F(i+1) B(i)) for i < M−1, B(M−1).
  kCombined1F1B,
};

/// Parses "none" | "1f1b" | "interleaved" | "combined_1f1b" (ScheduleError otherwise, listing the
/// accepted names).
ScheduleKind parse_schedule_kind(const std::string& name);
/// The name parse_schedule_kind accepts for `kind`.
std::string schedule_kind_name(ScheduleKind kind);
/// Every kind, in the order above (what help texts and parse_schedule_kind list).
const std::vector<ScheduleKind>& all_schedule_kinds();
/// Their names joined by `separator`: "none | 1f1b | interleaved | combined_1f1b".
std::string schedule_kind_names(const std::string& separator = " | ");

enum class Phase { kWarmup, kSteady, kCooldown };
enum class OpType { kForward, kBackward };

/// One step of a rank: run forward or backward of model chunk `chunk` (virtual stage) on
/// microbatch `microbatch`. In the steady state a forward and the backward right after it form
/// one 1F1B pair (both carry Phase::kSteady; the forward comes first).
struct Op {
  OpType type = OpType::kForward;
  int chunk = 0;       ///< virtual stage v ∈ [0, V)
  int microbatch = 0;  ///< ∈ [0, M)
  Phase phase = Phase::kWarmup;
  bool operator==(const Op& o) const {
    return type == o.type && chunk == o.chunk && microbatch == o.microbatch && phase == o.phase;
  }
};

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kInterleaved;
  int pipeline_size = 1;          ///< P
  int virtual_size = 1;           ///< V (1 for kNoPipelining and kOneFOneB)
  int num_microbatches = 1;       ///< M
  int microbatch_group_size = 0;  ///< N; 0 means the default N = P (interleaved only)
};

/// Checks the configuration against Megatron's constraints and throws ScheduleError naming the
/// broken rule: P, V, M ≥ 1; kNoPipelining needs P = 1 and V = 1; kOneFOneB needs V = 1 and P > 1;
/// kInterleaved needs P > 1, P ≤ N ≤ M, and M mod N == 0 or M mod N ≥ P (sched.py:1160-1180);
/// kCombined1F1B needs V = 1 when P = 1, and the interleaved rules when P > 1; a group size N ≠ 0
/// only for a schedule that takes one (ScheduleDef::takes_group_size).
void validate(const ScheduleConfig& config);

/// Number of warm-up forward steps of `rank` (spec §4.4 / §4.5 formulas, capped at M·V; 0 for
/// kNoPipelining). Megatron-LM schedules.py:952-979 (interleaved), 2147-2498 (1F1B).
/// Validates `config`; a rank outside [0, P) throws ScheduleError.
int warmup_steps(const ScheduleConfig& config, int rank);

/// The (microbatch, chunk) run by forward virtual step k of the interleaved schedule table
/// (spec §4.5: groups of N microbatches, chunk-major inside a group). k ∈ [0, M·V).
/// Megatron-LM schedules.py:989-1016. Validates `config` (ScheduleError).
struct TableEntry {
  int microbatch;
  int chunk;
};
std::vector<TableEntry> interleaved_table(const ScheduleConfig& config);

/// Every op of `rank` in execution order. Each chunk sees its microbatches first-in-first-out in
/// both forward and backward. Validates `config` first (ScheduleError; also for a rank outside
/// [0, P)). Phases: warm-up forwards kWarmup, steady F/B pairs kSteady, cool-down backwards
/// kCooldown. kNoPipelining (F(mb) then B(mb), spec §4.3) tags every op kSteady, so each
/// F(mb), B(mb) is one steady pair "(F0.mb B0.mb)". Megatron-LM schedules.py
/// forward_backward_{no_pipelining, pipelining_without_interleaving, pipelining_with_interleaving}.
std::vector<Op> rank_ops(const ScheduleConfig& config, int rank);

/// Whether ops[j] and ops[j + 1] of a rank's op list (rank_ops) run as one combined 1F1B step:
/// under a schedule whose ScheduleDef::combined_steps is set (`combined`), a steady-state
/// forward followed by a backward (Megatron combined_1f1b.py's steady loop). The one statement of
/// the pairing the executor runs and the cost simulator plays. Throws nothing.
bool combined_pair_at(bool combined, const std::vector<Op>& ops, size_t j);

/// One sub-step of a combined 1F1B step: run the next node of kind `node` of the forward
/// microbatch (`side` kForward) or of the backward one (kBackward).
struct SubStep {
  OpType side = OpType::kForward;
  NodeKind node = NodeKind::kAttention;
};

/// A schedule, described by itself. Each lives in a file of its own (no_pipelining.cc,
/// one_f_one_b.cc, interleaved.cc, combined_1f1b.cc) and is one row of schedules()
/// (registry.cc); the planner, the executor, the resource estimate and `mtp-harness layout
/// schedule` ask the row instead of testing kinds. Adding a schedule is a new file, its enum
/// value and its row.
struct ScheduleDef {
  ScheduleKind kind = ScheduleKind::kNoPipelining;
  const char* name = "";     ///< what scenarios, the CLI and records call it ("1f1b")
  const char* summary = "";  ///< one line for help texts
  /// Takes a microbatch group size N (microbatch_group_size, `layout schedule --group`), and
  /// `layout schedule` prints it.
  bool takes_group_size = false;
  /// Supports Megatron's overlap_p2p_comm (receives posted one op ahead).
  bool overlaps_p2p = false;
  /// Runs each steady (F, B) pair as one combined step and every backward node by node, in
  /// `combined_order` (Megatron combined_1f1b.py); a CUDA graph of a whole microbatch cannot.
  bool combined_steps = false;
  /// The order of a combined step's sub-steps inside a pair of transformer layers (the nodes the
  /// order does not name run after it: backward then forward).
  std::vector<SubStep> combined_order;
  /// Most MTP depths the schedule supports; −1: any.
  int max_mtp_num_layers = -1;
  /// Whether a variant that names no schedule gets this one for (P, V).
  bool (*is_default_for)(int pipeline_size, int virtual_size) = nullptr;
  /// The rules of this schedule beyond P, V, M ≥ 1 (ScheduleError naming the rule broken).
  void (*check)(const ScheduleConfig& config) = nullptr;
  /// Warm-up forwards of `rank` (config valid, rank in [0, P)).
  int (*warmup)(const ScheduleConfig& config, int rank) = nullptr;
  /// Every op of `rank` in execution order, given its warm-up count.
  std::vector<Op> (*ops)(const ScheduleConfig& config, int rank, int warmup) = nullptr;
};

/// Every schedule, in ScheduleKind order.
const std::vector<const ScheduleDef*>& schedules();
/// The row of `kind` (InternalError for a kind without one, a bug).
const ScheduleDef& schedule_def(ScheduleKind kind);
/// The schedule a variant without `schedule` gets for P and V: none for P = 1, 1f1b for V = 1,
/// interleaved otherwise (Megatron's choice by pipeline and virtual size).
ScheduleKind default_schedule_kind(int pipeline_size, int virtual_size);

/// Compact text: forwards "F<chunk>.<mb>", backwards "B<chunk>.<mb>", separated by one space;
/// a steady-state forward and its paired backward are wrapped as "(F0.6 B1.0)".
std::string format_ops(const std::vector<Op>& ops);

}  // namespace mtp::schedule
