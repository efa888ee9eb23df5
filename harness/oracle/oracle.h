// File: harness/oracle/oracle.h
//
// An independent oracle of one training step: the model's losses and the gradient of the
// training objective written as one straight-line float64 program — no pipeline, no microbatch
// graph, no chunk programs, none of harness/model's layer code or the engine — from the weights
// and the batch a record holds. Reference and candidate share the model, the loss and the engine,
// so a bug in shared code moves both alike; this program shares none of that code and sees it
// (issue 21). It follows Megatron-LM (d98e8a6) as the spec megatron_mtp_standalone.md cites it:
//   embedding     language_model/embedding.py: word_embeddings(ids), [b, s] → [s, b, h]
//   layer         transformer_layer.py: h + attn(RMSNorm(h)), then + mlp(RMSNorm(·))
//   attention     attention.py + dot_product_attention.py: fused qkv per query group
//                 [q·(nh/ng), k, v], rotate-half RoPE (rope_utils.py _apply_rotary_pos_emb_bshd),
//                 causal softmax(q kᵀ / √hn), heads concatenated head-major, linear_proj
//   MLP           mlp.py: fc1 → [gate, up] halves, silu(gate)·up, fc2 (SwiGLU)
//   MoE           router.py topk_routing_with_score_function (sigmoid, the expert bias only for
//                 selection, top-k gates normalised by their sum, × scaling factor), experts.py
//                 (each expert a SwiGLU), shared_experts.py (added unweighted)
//   MTP depth k   multi_token_prediction.py:1071-1251: ids rolled left k times (tail 0),
//                 eh_proj([enorm(embed(ids)), hnorm(h_{k−1})]), a transformer layer,
//                 its final_layernorm
//   losses        gpt_model.py / process_mtp_loss (mtp.py:932-1068): per microbatch the masked
//                 mean of cross entropy (Σ mask·ce / max(Σ mask, 1)); depth k's labels and mask
//                 rolled left k times
//   objective     schedules.py:329-378 with MTPLossAutoScaler and distributed data parallel's
//                 averaging: J = (1/K) Σ_microbatches (lm + λ/D Σ_k mtp_k) over the K = M·DP
//                 microbatches of the global batch; a main grad is ∂J/∂w (the embedding group
//                 sums every use of a shared table, so the whole gradient of the one table).
//                 With calculate_per_token_loss (finalize_model_grads.py:697-713) every loss is
//                 the global batch's token mean instead: lm = Σ mask·ce / max(N_0, 1) over all
//                 K microbatches, mtp_k likewise with depth k's rolled masks; the main grads
//                 are the summed grads times Megatron's scaling factor 1.0 / num_tokens, a
//                 float32 tensor (an int tensor's true division), so ∂J/∂w · N_0 · fl32(1/N_0):
//                 a factor within 2^-24 of 1 that a float64 run's grads carry too
// Everything is float64 on the CPU with LibTorch's autograd. MoE selection is made on the
// float64 scores (stable order: a tie goes to the lower expert id).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "harness/config/model_config.h"

namespace mtp::oracle {

/// One step's inputs: the model, every parameter by global name (any float dtype; taken as
/// float64), and the global batch, [K, b, s] each (token ids, labels, loss mask 0/1), K = M·DP
/// microbatches.
struct StepInputs {
  config::ModelConfig model;
  std::map<std::string, at::Tensor> weights;
  at::Tensor tokens, labels, loss_mask;
  /// Without the per-token loss: the run's microbatches per data-parallel rank (M) and its
  /// context-parallel size (CP). Megatron sets each MTP auto-scaler's scale to loss_scale / M
  /// (× CP with context parallel) in float32 (schedules.py: a float32 tensor), so the MTP terms
  /// of a run's grads carry fl32(fl32(1/M)·CP) / (CP/M), within 2^-23 of 1 (exactly 1 when M and
  /// CP are powers of two), which a float64 run's grads show; the oracle applies the same
  /// factor. 0 = unknown: the exact 1/M (a record without the attributes).
  int64_t num_microbatches = 0;
  int64_t context_parallel_size = 1;
};

/// What the step computes: the losses averaged over the K microbatches (lm, mtp_1..mtp_D, total
/// = lm + λ/D Σ mtp_k) and ∂J/∂w of every parameter (float64, the parameter's shape).
struct StepResult {
  double lm = 0.0;
  std::vector<double> mtp;
  double total = 0.0;
  std::map<std::string, at::Tensor> grads;
};

/// Runs the straight-line float64 step. Throws InputError when a parameter of the model
/// (config::parameter_specs) is missing from `in.weights` or has another shape, or when the batch
/// is not [K, b, s] with b, s the model's.
StepResult straight_line_step(const StepInputs& in);

/// ‖got − want‖₂ / ‖want‖₂ over every element (float64); 0 when both are zero, infinity when only
/// `want` is. The measure the oracle's bounds are stated in.
double relative_l2(const at::Tensor& got, const at::Tensor& want);

}  // namespace mtp::oracle
