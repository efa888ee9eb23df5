// File: harness/model/loss.h
//
// The loss stage: output head, masked cross-entropy, MTP loss terms and the MTP loss
// auto-scaler. One code path for the main head and every MTP depth (the point of Megatron's
// standalone design: spec §1.3–1.5, megatron_conventions.md "Arithmetic" 7–9).
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "harness/config/model_config.h"
#include "harness/model/context_parallel.h"

namespace mtp::model {

/// Cross entropy from logits, per token: ce = log Σ exp(l − max) − (l_target − max).
/// logits [s, b, V] (fp32/fp64), labels [b, s] int64 → ce [b, s]. Megatron
/// vocab_parallel_cross_entropy with TP = 1 (the max is not differentiated).
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels);

/// Megatron MTPLossAutoScaler (multi_token_prediction.py): forward returns `main_hidden`
/// unchanged; backward passes the incoming grad to `main_hidden` and gives `mtp_term` [b, s] the
/// gradient ones·`scale`. This adds Σ mtp_term·scale to the objective without changing any
/// forward value. `scale` = S_mtp = 1/M (fp32) here.
at::Tensor mtp_loss_auto_scale(const at::Tensor& main_hidden, const at::Tensor& mtp_term,
                               double scale);

/// One microbatch as the loss stage sees it.
struct LossInputs {
  at::Tensor labels;     ///< [b, s] int64, labels[i] = token[i+1]
  at::Tensor loss_mask;  ///< [b, s], model dtype, 0/1
  /// calculate_per_token_loss only: the step's token counts [N_0, N_1 .. N_D] of the main mask
  /// and of each depth's rolled mask, over the whole global batch (every microbatch of every
  /// data-parallel rank); empty = per-microbatch normalisation.
  std::vector<double> token_counts{};
  /// The counts depth k's N_0/N_k rescale reads; empty = token_counts. Only the planted #7452
  /// bug (config::Fault::kMtpLocalTokenCount) sets it: the data-parallel rank's own counts.
  std::vector<double> mtp_ratio_counts{};
  /// Context parallel (size > 1): this rank holds s/CP tokens of every row (context_parallel.h);
  /// null otherwise.
  ContextParallel* cp = nullptr;
  /// With cp: this microbatch's counts [N_0, N_1 .. N_D] of the main mask and of each depth's
  /// rolled mask over the whole sequence (every CP rank's tokens), which normalise the loss.
  std::vector<double> sequence_token_counts{};
};

/// Result of the loss stage for one microbatch.
struct LossOutput {
  /// Scalar to call backward() on: Σ mask·ce / max(Σ mask, 1) / M, with every MTP term attached
  /// through mtp_loss_auto_scale so that backward also yields ∂/∂(mtp term) = 1/M.
  at::Tensor objective;
  /// Σ mask·ce / max(Σ mask, 1) (this microbatch): a 0-dim tensor in the loss dtype on the
  /// model's device, not read back here (no host sync inside a forward: CUDA graphs capture it).
  at::Tensor lm;
  /// Per depth k: Σ mask_k·ce_k / max(Σ mask_k, 1), not × λ/D; 0-dim tensors like `lm`.
  std::vector<at::Tensor> mtp;
};

/// The loss stage for one microbatch. hidden = [h0, h1, …, hD], each [s, b, H] (h0 after the
/// decoder final norm, h_k after MTP final norm k); head_weight [V, H] (output_layer.weight, or
/// the embedding copy when tied); M = number of microbatches. Per depth k the labels and mask
/// are rolled left k times in lockstep and N_k is counted after the roll; the MTP term is
/// (λ/D)·mask_k·ce_k / max(N_k, 1). Heads run for k = 1..D first, then the main head (Megatron
/// order). Source: Megatron-LM multi_token_prediction.py process_mtp_loss, gpt_model.py.
///
/// With mb.token_counts (calculate_per_token_loss): the objective is the masked sum
/// Σ mask·ce, depth k's term is (λ/D)·mask_k·ce_k·(N_0/max(N_k, 1)) with auto-scaler scale 1
/// (schedules.py forward_step_calc_loss), and the engine divides the main grads by max(N_0, 1)
/// after the data-parallel sum (finalize_model_grads.py). `lm` and `mtp` are then this
/// microbatch's share of the global token mean (Σ mask·ce / max(N_0, 1)), summed over the batch.
///
/// Context parallel (mb.cp of size CP > 1; Megatron's legacy loss path, schedules.py
/// forward_step_calc_loss with loss_func returning 2 values): each rank's objective is its own
/// tokens' Σ mask·ce over the whole sequence's max(N_0, 1), × CP / M, and each MTP auto-scaler's
/// scale is CP / M, because the engine averages main grads over the data- and context-parallel
/// ranks (÷ DP·CP), so the CP factors cancel and the grads are those of the whole sequence. The
/// planted #3943 (config::Fault::kMtpLossScaleWithoutCp) leaves the MTP scale at 1/M, so the MTP
/// terms' grads come out ÷ CP. Per-token mode needs no factor (the grads are summed, then ÷ N_0).
/// `lm` and `mtp` are the whole sequence's: the per-token losses are gathered over the CP group
/// and summed in one reduction, as with CP = 1.
LossOutput loss_stage_forward(const std::vector<at::Tensor>& hidden, const at::Tensor& head_weight,
                              const LossInputs& mb, const config::ModelConfig& cfg,
                              int64_t num_microbatches);

}  // namespace mtp::model
