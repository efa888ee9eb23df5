// File: harness/config/fault.h
//
// Planted bugs (issue 21): each a realistic field bug in code reference and candidate share (or,
// for one, in the standalone placement), compiled in and off by default. A scenario turns one on
// per variant (`inject = "<fault>"`) only when its [scenario] table says
// `fault_injection = true`; scenarios/faults.toml (and `mtp-harness selftest`) proves that a
// named expectation catches each at its first affected step with the right tensor. The code that
// plants each one tests `ModelConfig::inject` where the bug would live.
//
// Example:
//   config::Fault f = config::parse_enum<config::Fault>("mtp_loss_main_mask_count", "inject");
//   config::fault_info(f).source == "Megatron-LM #2417";
#pragma once

#include <string_view>
#include <vector>

#include "harness/config/enums.h"

namespace mtp::config {

enum class Fault {
  kNone,
  /// engine/grad_finalize.cc: the word-embedding copy of the MTP stage is left out of the
  /// embedding group's all-reduce (it keeps its own grad; the others sum without it).
  kMtpEmbeddingOutOfGroup,
  /// engine/grad_clip.cc: the word embedding's squares are added twice to the global norm.
  kEmbeddingNormCountedTwice,
  /// model/loss.cc: depth k's loss is divided by the main mask's token count instead of the
  /// count of its rolled mask.
  kMtpLossMainMaskCount,
  /// model/loss.cc: the MTP auto-scaler's scale lacks the 1/M of the microbatch average.
  kMtpScaleWithoutOneOverM,
  /// model/loss.cc: the MTP terms are scaled by λ instead of λ/D.
  kMtpScaleWithoutOneOverD,
  /// model/loss.cc: depth k's labels and mask are rolled k + 1 times instead of k.
  kMtpLabelsRolledOnceMore,
  /// engine/trainer.cc: every stage's grads are zeroed before each microbatch's backward, so
  /// only the last microbatch's gradient survives the accumulation.
  kGradsZeroedBetweenMicrobatches,
  /// engine/executor.cc: the standalone MTP stage receives zeros instead of the hidden state
  /// (the receive buffer is never filled).
  kStandaloneStageFedZeros,
  /// engine/optimizer.cc: Adam without its bias correction (m and v not divided by 1 − β^t).
  kAdamBiasCorrectionOff,
  /// engine/trainer.cc: with calculate_per_token_loss, depth k's MTP sum is rescaled by this
  /// data-parallel rank's own counts N_0/N_k (over its microbatches) instead of the global
  /// batch's (Megatron-LM #7452: process_mtp_loss uses local counts).
  kMtpLocalTokenCount,
  /// model/loss.cc: with context parallelism the MTP auto-scaler's scale lacks the × CP that the
  /// main loss gets, so after the ÷ DP·CP average the MTP terms' grads are ÷ CP
  /// (Megatron-LM #3943).
  kMtpLossScaleWithoutCp,
};

template <>
struct EnumTable<Fault> {
  static constexpr const char* kWhat = "inject";
  static constexpr std::pair<Fault, std::string_view> kValues[] = {
      {Fault::kNone, "none"},
      {Fault::kMtpEmbeddingOutOfGroup, "mtp_embedding_out_of_group"},
      {Fault::kEmbeddingNormCountedTwice, "embedding_norm_counted_twice"},
      {Fault::kMtpLossMainMaskCount, "mtp_loss_main_mask_count"},
      {Fault::kMtpScaleWithoutOneOverM, "mtp_scale_without_1_over_m"},
      {Fault::kMtpScaleWithoutOneOverD, "mtp_scale_without_1_over_d"},
      {Fault::kMtpLabelsRolledOnceMore, "mtp_labels_rolled_once_more"},
      {Fault::kGradsZeroedBetweenMicrobatches, "grads_zeroed_between_microbatches"},
      {Fault::kStandaloneStageFedZeros, "standalone_stage_fed_zeros"},
      {Fault::kAdamBiasCorrectionOff, "adam_bias_correction_off"},
      {Fault::kMtpLocalTokenCount, "mtp_local_token_count"},
      {Fault::kMtpLossScaleWithoutCp, "mtp_loss_scale_without_cp"}};
};

/// What a fault plants and where the field saw it.
struct FaultInfo {
  Fault fault = Fault::kNone;
  std::string_view what;    ///< the bug, in a sentence
  std::string_view source;  ///< the public report it follows, or "own reading: <file>"
};

/// The description of `f` (every value of Fault has one).
const FaultInfo& fault_info(Fault f);

/// Every fault but kNone, in table order.
std::vector<Fault> all_faults();

}  // namespace mtp::config
