// File: harness/layout/layout.h
//
// Megatron-LM `pipeline_model_parallel_layout` strings: parsing, validation and the StagePlan of
// every (pipeline rank, virtual stage). Source: Megatron-LM
// megatron/core/transformer/pipeline_parallel_layer_layout.py (spec megatron_mtp_standalone.md
// §2.1–2.6), plus the rules Megatron documents but does not enforce (spec §2.4 "Gaps"):
// `E` in stage 0, `L` in the last stage, no `m` on pipeline rank 0.
//
// Example:
//   PipelineLayout l = build_layout("E|t*3|(t|)*4tm|L", /*pipeline_size=*/4,
//                                   /*num_layers=*/8, /*mtp_num_layers=*/1);
//   l.virtual_size == 2; l.mtp_standalone == true; l.at(2, 1).decoder_layers == {7};
//
// Torch-free: usable by every tool and test.
#pragma once

#include <string>
#include <vector>

#include "harness/common/error.h"

namespace mtp::layout {

/// A layout string that breaks the grammar or a validation rule. what() names the rule, the
/// offending stage and/or character position, and quotes the layout.
class LayoutError : public InputError {
 public:
  explicit LayoutError(const std::string& msg) : InputError(msg) {}
};

/// Result of the grammar pass (spec §2.2): commas removed, `(..)*n` and `x*n` expanded, split on
/// `|`. Each stage is a string over {E, t, m, L}; an empty string is an empty stage.
struct ParsedLayout {
  std::string text;                 ///< the string as given
  std::vector<std::string> stages;  ///< expanded stages in string order (stage index i)
};

/// Parses `text` with the grammar of spec §2.1–2.2.
/// Throws LayoutError for: a character outside {E,t,m,L,|,*,(,),,,digits} (position given);
/// `*` not followed by a positive decimal count; a count of 0; `(` without matching `)`;
/// nested parentheses; a parenthesised group not followed by `*n`; `*n` with nothing before it.
ParsedLayout parse_layout(const std::string& text);

/// What one model chunk (pipeline rank p, virtual stage v; stage index i = v·P + p) holds, by the
/// layout alone. Implementations (reference/, candidate/) decide what else the chunk builds
/// (embedding copies, where the trunk final layernorm really goes in their design).
struct StagePlan {
  int stage_index = 0;              ///< i, the position in the layout string
  int pipeline_rank = 0;            ///< p = i mod P
  int virtual_stage = 0;            ///< v = i div P
  std::vector<int> decoder_layers;  ///< global decoder layer ids, 0-based, ascending
  std::vector<int> mtp_depths;      ///< MTP depths k, 1-based, ascending (all D or none)
  bool has_embedding = false;       ///< `E` (always stage 0 after validation)
  bool has_loss = false;            ///< `L` (always the last stage after validation)
  /// Trunk final layernorm by Megatron's post-PR rule (spec §3.2): with MTP (D > 0) on the stage
  /// that holds decoder layer N−1 (0-based; the stage holding `E` when N = 0); without MTP on
  /// the last stage.
  bool owns_final_layernorm = false;
  bool is_first() const { return stage_index == 0; }
};

/// A validated layout: P pipeline ranks × V virtual stages.
struct PipelineLayout {
  std::string text;               ///< as given (default_layout: the equivalent layout string)
  int pipeline_size = 1;          ///< P
  int virtual_size = 1;           ///< V = #stages / P
  int num_layers = 0;             ///< N
  int mtp_num_layers = 0;         ///< D
  std::vector<StagePlan> stages;  ///< indexed by stage index i
  int mtp_stage = -1;  ///< the first stage holding an `m` (R7: the only one), −1 when D = 0
  /// Every stage holding an `m`, ascending: {mtp_stage} under R7; with MtpRule::kSplit the
  /// consecutive stages the depths are spread over (depth k in the stage of the k-th `m`).
  std::vector<int> mtp_stages;
  /// Megatron's `mtp_standalone` (spec §2.6): some rank p ≠ P−1 has `m` in its last virtual stage,
  /// i.e. the MTP stage is not the loss stage.
  bool mtp_standalone = false;

  int num_stages() const { return static_cast<int>(stages.size()); }
  /// The StagePlan of (pipeline rank p, virtual stage v). Throws InternalError when out of range.
  const StagePlan& at(int pipeline_rank, int virtual_stage) const;
  /// The last stage (P−1, V−1), which holds `L`.
  const StagePlan& loss_stage() const { return stages.back(); }
};

/// How R7 reads: every `m` in one stage (reference/, candidate/: Megatron-LM d98e8a6
/// pipeline_parallel_layer_layout.py:131 asserts it), or spread over consecutive stages
/// (candidate/split/: Megatron-LM #5329 `mtp_layer_split`, e.g. `E|(t|)*11m|m|m|L`).
enum class MtpRule {
  kOneStage,
  /// R7 becomes: the stages holding `m` are consecutive, each holds only `m` after the first
  /// (whose `t` come before its `m`, R6); R8 and R9 hold for each of them; R10 for the last.
  kSplit,
};

/// Parses and validates `text` for P = `pipeline_size`. Rules (each error names its rule number
/// and text, the stage index with (p, v), the character, and quotes the layout):
///  R1 #stages divisible by P;  R2 exactly one `E`, and it is the first item of stage 0;
///  R3 exactly one `L`, and it is the last item of the last stage;  R4 #t == num_layers;
///  R5 #m == mtp_num_layers;  R6 no `t` after the first `m` (string order);
///  R7 all `m` in one stage;  R8 that stage is a last virtual stage (v = V−1);
///  R9 not on pipeline rank 0 when P > 1 (Megatron doc says so, code does not enforce it);
///  R10 every stage after the MTP stage is empty or holds only `L`.
/// Also throws LayoutError when pipeline_size < 1, num_layers < 1 or mtp_num_layers < 0.
PipelineLayout build_layout(const std::string& text, int pipeline_size, int num_layers,
                            int mtp_num_layers, MtpRule mtp_rule = MtpRule::kOneStage);

/// Megatron's split when no layout is given: P·V stages; decoder layers spread evenly
/// (N must divide by P·V, else LayoutError), `E` with stage 0, every `m` and `L` on the last stage.
/// Returned with the equivalent layout string in `text`, e.g. P=2,V=1,N=4,D=1 → "Ett|ttmL".
PipelineLayout default_layout(int pipeline_size, int virtual_size, int num_layers,
                              int mtp_num_layers);

/// The rank map as a text table, one row per pipeline rank, one column per virtual stage, each
/// cell listing the chunk's contents ("E t0-2", "t7 FLN m1-2", "L", "-" when empty), followed by
/// the derived facts (P, V, N, D, MTP stage, mtp_standalone). Modelled on the table in Megatron's
/// pipeline_parallel_layout docs.
std::string format_rank_map(const PipelineLayout& layout);

}  // namespace mtp::layout
