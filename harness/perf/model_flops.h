// File: harness/perf/model_flops.h
//
// The model FLOPs of one training step (forward and backward), the numerator of MFU (model
// FLOPs utilisation = model FLOPs per step / step time / the device's peak FLOP/s), by
// Megatron-LM's formula: megatron/training/training.py num_floating_point_operations(),
// transformer_flops(), at commit d98e8a64dd (the commit of golden/oracle). Every GEMM counts
// 2 FLOPs per multiply-add and 3 times (forward, data gradient, weight gradient):
//
//   FLOPs = 6·T·[ H·(3F·Ld + (3·F_moe·k + 3·F_sh)·Lm)          SwiGLU MLPs (dense, MoE)
//                 + (H·(nh + 2·ng)·hn + nh·hn·H)·(N + D)         QKV and output projections
//                 + D·(3H + 2H²)                                MTP norms and eh_proj
//                 + H·V·(D + 1) ]                               output layer, main head + D
//         + 6·nh·hn·(N + D)·B·s²                                QKᵀ and PV, causal (halved)
//
// T = B·s tokens of B samples of s tokens; N decoder layers and D MTP depths, each depth one
// more transformer layer whose MLP is MoE when the last decoder layer's is (Ld dense and Lm
// MoE layers in all); H hidden, F / F_moe / F_sh the dense, routed-expert and shared-expert
// FFN sizes, k the router's top-k, nh heads, ng query groups, hn = H/nh, V the vocabulary
// (unpadded: the harness does not pad it). Norms, RoPE, softmax, the router's GEMM and
// elementwise ops are not counted, as in Megatron. PaLM's MFU (Chowdhery et al. 2022,
// appendix B: 6N + 12·L·H·Q·T per token) counts the attention scores without the causal
// halving, i.e. twice the last term. Torch-free.
//
// Example:
//   const StepFlops f = model_flops_per_step(cfg, /*samples=*/M * cfg.micro_batch_size);
//   const double mfu = f.total / step_seconds / 989.4e12;  // H200 dense bf16 peak
#pragma once

#include <cstdint>

#include "harness/config/model_config.h"

namespace mtp::perf {

/// StepFlops: one step's model FLOPs, split as Megatron's formula is.
struct StepFlops {
  double token_linear = 0.0;  ///< GEMMs whose cost grows with the tokens (6·T·[…] above)
  double attention = 0.0;     ///< the s² term: attention scores and their product with V
  double total = 0.0;         ///< token_linear + attention
};

/// model_flops_per_step: the model FLOPs of forward + backward over `samples` samples of
/// cfg.seq_length tokens (a step of M microbatches of b samples: samples = M·b per replica).
/// Throws InputError when cfg is invalid (ModelConfig::validate) or samples < 1.
StepFlops model_flops_per_step(const config::ModelConfig& cfg, int64_t samples);

}  // namespace mtp::perf
