// File: harness/sim/activation.h
//
// Saved activations per microbatch of a model chunk, in bytes: what the resource estimate
// (engine/resource_estimate.h) and the pipeline simulator (sim/simulate.h) multiply by the
// microbatches a rank holds in flight. Formulas after Korthikanti et al. 2022, "Reducing
// Activation Recomputation", §4.1, for this harness's ops (pre-norm, SwiGLU, unfused softmax or
// flash attention). Torch-free.
#pragma once

#include <cstdint>

#include "harness/config/model_config.h"
#include "harness/layout/layout.h"

namespace mtp::sim {

/// Saved activations of one decoder (or MTP) layer for one microbatch on one of `cp`
/// context-parallel ranks, in bytes, with elements of `element_bytes`; s_l = s / cp tokens are
/// the rank's own: (13·h + 3·F_eff)·s_l·b elements, F_eff = F for a dense MLP, topk·F_moe +
/// F_shared (+ E fp32 router scores) for MoE, plus 2·a·s_l·s·b scores and probabilities in
/// max(dtype, fp32) (its queries against every key; flash attention: a·s_l·b fp32 log-sum-exp
/// instead), plus, when cp > 1, the all-gathered K and V (2·s·b·ng·hn) the attention keeps.
/// cp = 1 is the whole sequence. Throws nothing.
uint64_t layer_activation_bytes(const config::ModelConfig& m, bool moe, bool flash,
                                uint64_t element_bytes, int cp = 1);

/// One output head (LM or an MTP depth) on one of `cp` context-parallel ranks: s_l·b·V logits in
/// the training dtype plus their fp32 cast and log-softmax, plus 2·s_l·b·h for the final
/// layernorm (s_l = s / cp). Throws nothing.
uint64_t head_activation_bytes(const config::ModelConfig& m, uint64_t element_bytes, int cp = 1);

/// The transient workspace one attention call needs beyond the saved activations, in bytes: for
/// attention_backend "harness" (kernels::causal_attention) the backward's two [b·a, s, s] scratch
/// tensors of the accumulation type (fp64 for fp64, else fp32) and its [b·a, s] D; 0 for the
/// other backends (their score memory is counted as saved activations or is O(s)). A rank runs
/// one attention at a time, so a rank's peak adds it once. Throws nothing.
uint64_t attention_workspace_bytes(const config::ModelConfig& m, uint64_t element_bytes);

/// Saved activations of model chunk `st` for one microbatch on one of `cp` context-parallel
/// ranks: the embedding output (s_l·b·h), its decoder layers, each MTP depth (6·s_l·b·h for two
/// norms, the 2h concatenation and eh_proj, plus its layer and head) and, with `L`, the LM head.
/// Throws nothing.
uint64_t stage_activation_bytes(const config::ModelConfig& m, const layout::StagePlan& st,
                                uint64_t element_bytes, int cp = 1);

}  // namespace mtp::sim
