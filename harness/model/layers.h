// File: harness/model/layers.h
//
// The layers both implementations share, as functions of explicit weights. Activations are
// [s, b, H] (sequence-first, as Megatron-LM); the dtype is the weights' dtype (fp32 in runs,
// fp64 in gradient checks). Arithmetic follows megatron_conventions.md "Arithmetic" 1–7.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/model/context_parallel.h"
#include "harness/model/moe.h"
#include "harness/model/param_table.h"

namespace mtp::model {

/// Whether `t` is a reduced-precision floating type (bf16, fp16): the ops below then compute their
/// reductions in fp32 as Megatron-LM does (torch.nn.RMSNorm, FusedScaleMaskSoftmax with
/// attention_softmax_in_fp32, the cross entropy on logits.float()).
bool is_reduced_precision(const at::Tensor& t);

/// t in fp32 when it is of reduced precision, else t itself (fp32, fp64 stay).
at::Tensor loss_precision(const at::Tensor& t);

/// RMSNorm: x · rsqrt(mean(x², last dim) + eps) · w. x [..., H], w [H]. Megatron local RMSNorm
/// (torch.nn.RMSNorm): for bf16 x the normalisation runs in fp32, is cast to bf16, then · w.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

/// y = x · Wᵀ, no bias. x [..., in], weight [out, in] → [..., out]. Megatron ColumnParallelLinear
/// / RowParallelLinear with TP = 1 and bias off.
at::Tensor linear_no_bias(const at::Tensor& x, const at::Tensor& weight);

/// RoPE tables for positions 0..s−1 (Megatron RotaryEmbedding): inv_freq =
/// 1/base^(arange(0,hn,2)/hn), freqs = outer(arange(s), inv_freq), emb = cat(freqs, freqs); returns
/// cos and sin, each [s, hn], computed in `dtype` (fp32 in runs, as Megatron); for bf16 computed in
/// fp32 and cast (Megatron: cos(freqs).to(t.dtype)).
/// With context parallelism the tables hold the rows of this rank's positions only, and `cp`
/// says which (the sequence-dependent ops read it: attention, the MTP roll). Every layer builder
/// receives the tables, so they also carry the rank's expert-parallel group `ep` (the MoE
/// layers' dispatch and combine read it).
struct RopeTables {
  at::Tensor cos;                 ///< [s, hn] (CP > 1: [s/CP, hn], the rows of cp->positions())
  at::Tensor sin;                 ///< [s, hn] (CP > 1: [s/CP, hn])
  ContextParallel* cp = nullptr;  ///< null (or size 1): this rank holds the whole sequence
  ExpertParallel* ep = nullptr;   ///< null (or size 1): this rank runs every expert
};

/// The groups of one rank that a model chunk exchanges data over inside its layers (null:
/// size 1). Both are the rank's own objects, used on its thread.
struct ParallelGroups {
  ContextParallel* cp = nullptr;
  ExpertParallel* ep = nullptr;
};
RopeTables rope_tables(int64_t seq_length, int64_t kv_channels, double base, at::ScalarType dtype,
                       at::Device device = at::Device(at::kCPU));

/// The tables of a chunk: rope_tables over the whole sequence, then (groups.cp of size > 1) only
/// the rows of this rank's positions (copies of the same bits), with groups.cp and groups.ep
/// attached.
RopeTables chunk_rope_tables(const config::ModelConfig& cfg, at::ScalarType dtype,
                             at::Device device, const ParallelGroups& groups);

/// Rotate-half RoPE on x [s, b, heads, hn]: x·cos + rotate_half(x)·sin, rotate_half(x) =
/// cat(−x[hn/2:], x[:hn/2]). Megatron apply_rotary_pos_emb_bshd, non-interleaved.
at::Tensor apply_rope(const at::Tensor& x, const RopeTables& rope);

/// Weights of one pre-norm transformer layer, looked up from a ParamTable by the names of
/// config::layer_param_names(prefix, cfg, is_moe). A dense layer fills linear_fc1/linear_fc2; an
/// MoE layer fills `moe` instead (and leaves linear_fc1/linear_fc2 undefined).
struct LayerWeights {
  at::Tensor input_layernorm;    ///< [H]
  at::Tensor linear_qkv;         ///< [ng·(nh/ng+2)·hn, H], rows grouped per KV group (q…, k, v)
  at::Tensor linear_proj;        ///< [H, nh·hn]
  at::Tensor pre_mlp_layernorm;  ///< [H]
  at::Tensor linear_fc1;         ///< [2F, H]: rows [0,F) gate, [F,2F) up (dense layers)
  at::Tensor linear_fc2;         ///< [H, F] (dense layers)
  std::optional<MoeWeights> moe;  ///< MoE layers: router, routed experts, shared expert
  /// `is_moe`: decoder layer i: cfg.is_moe_layer(i); MTP layers: cfg.mtp_layer_is_moe().
  /// `ep`: the rank's expert-parallel group (null: every routed expert; MoeWeights::from).
  static LayerWeights from(const ParamTable& params, const std::string& prefix,
                           const config::ModelConfig& cfg, bool is_moe,
                           const ExpertParallel* ep = nullptr);
};

/// Causal self-attention with RoPE and GQA. x [s, b, H] (already normalised) → [s, b, H].
/// Scores · 1/√hn, masked (future) scores set to −10000, softmax over keys, query head h reads
/// KV group h / (nh/ng). Megatron SelfAttention + DotProductAttention (local spec). With
/// cfg.attention_backend = flash or harness the scores-to-context part is one fused op
/// (kernels::flash_causal_attention, kernels::causal_attention) on the same q, k, v.
/// Context parallel (rope.cp of size > 1): x holds this rank's s/CP tokens; K and V (after RoPE)
/// are all-gathered into global order (context_parallel.h), each query attends to the keys at
/// global positions ≤ its own, so every score row is the one the whole sequence gives.
at::Tensor self_attention(const at::Tensor& x, const LayerWeights& w,
                          const config::ModelConfig& cfg, const RopeTables& rope);

/// SwiGLU: fc2(silu(gate) · up), [gate; up] = x · fc1ᵀ. x [..., H], fc1 [2F, H], fc2 [H, F] →
/// [..., H]. Megatron MLP with gated_linear_unit and silu (also each MoE expert). With
/// `kernels` = harness the activation is kernels::swiglu (one CUDA kernel each way, bitwise the
/// composite `at::silu(gate) * up` that the torch kernel set runs).
at::Tensor swiglu(const at::Tensor& x, const at::Tensor& fc1, const at::Tensor& fc2,
                  config::Kernels kernels);

/// The dense layer's SwiGLU MLP: swiglu(x, w.linear_fc1, w.linear_fc2, cfg.kernels).
/// x [s, b, H] → [s, b, H].
at::Tensor swiglu_mlp(const at::Tensor& x, const LayerWeights& w, const config::ModelConfig& cfg);

/// Pre-norm residual layer: x + attn(norm(x)), then + mlp(norm(·)), where mlp is the dense SwiGLU
/// or, when w.moe is set, moe_mlp (moe.h). x [s, b, H] → [s, b, H].
/// Megatron TransformerLayer (local spec, dropout 0, no biases).
at::Tensor transformer_layer(const at::Tensor& x, const LayerWeights& w,
                             const config::ModelConfig& cfg, const RopeTables& rope);

/// RMSNorm with the kernels `cfg` selects (cfg.kernels, cfg.norm_epsilon): rms_norm above, or
/// kernels::rms_norm (one autograd node, fixed-order weight-gradient reduction).
at::Tensor norm(const at::Tensor& x, const at::Tensor& weight, const config::ModelConfig& cfg);

/// Word-embedding lookup with the kernels `cfg` selects: embedding_lookup below, or
/// kernels::embedding_lookup (backward by stable sort of the ids, no atomics). ids [b, s] → [s, b,
/// H].
at::Tensor embed(const at::Tensor& ids, const at::Tensor& table, const config::ModelConfig& cfg);

/// Word-embedding lookup: ids [b, s] int64, table [V, H] → [s, b, H] (contiguous). Megatron
/// LanguageModelEmbedding without position embedding; index_select (its deterministic path).
at::Tensor embedding_lookup(const at::Tensor& ids, const at::Tensor& table);

}  // namespace mtp::model

namespace mtp::model {

/// Runs decoder layers `layer_ids` (global, 0-based, ascending) on x [s, b, H]; weights under
/// "decoder.layers.<i>." in `params`; layer i is MoE when cfg.is_moe_layer(i). Megatron
/// TransformerBlock without the final norm.
at::Tensor decoder_layers_forward(const at::Tensor& x, const std::vector<int>& layer_ids,
                                  const ParamTable& params, const config::ModelConfig& cfg,
                                  const RopeTables& rope);

}  // namespace mtp::model
