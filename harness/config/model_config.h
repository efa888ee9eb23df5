// File: harness/config/model_config.h
//
// Hyperparameters of the DeepSeek-V3-style GPT with Multi-Token Prediction that both
// implementations train, under Megatron-LM's argument names (megatron_conventions.md).
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/enums.h"
#include "harness/config/fault.h"

namespace mtp::config {

/// Model hyperparameters. Names follow Megatron-LM's TransformerConfig / arguments.
struct ModelConfig {
  int64_t num_layers = 8;                ///< N, decoder layers of the trunk
  int64_t hidden_size = 64;              ///< H
  int64_t ffn_hidden_size = 128;         ///< F (SwiGLU: fc1 has 2F rows)
  int64_t num_attention_heads = 4;       ///< nh
  int64_t num_query_groups = 4;          ///< ng (GQA); = nh for plain multi-head attention
  int64_t vocab_size = 256;              ///< V (byte-level tokens need ≥ 256)
  int64_t seq_length = 32;               ///< s
  int64_t micro_batch_size = 2;          ///< b
  int64_t mtp_num_layers = 0;            ///< D, MTP depths; 0 = no MTP (unset: Megatron's None)
  double mtp_loss_scaling_factor = 0.1;  ///< λ
  double rotary_base = 10000.0;
  double norm_epsilon = 1e-5;
  bool untie_embeddings = true;  ///< false: output head uses the word-embedding table
  /// Megatron-LM's --calculate-per-token-loss: each microbatch's loss is its masked sum (not its
  /// mean), depth k's MTP sum is rescaled by N_0/N_k, and finalize_model_grads divides every
  /// main grad by N_0 (after the data-parallel sum, which then does not average). N_0 and N_k are
  /// the step's token counts over the whole global batch (every microbatch of every
  /// data-parallel rank): the normalisation Megatron-LM #7452 asks for. Off: each microbatch
  /// is normalised by its own counts and the global batch averaged (Megatron's default).
  bool calculate_per_token_loss = false;
  /// Kernels for RMSNorm, the word-embedding lookup and cross entropy: LibTorch ops with
  /// deterministic algorithms, or kernels/ops.h (fixed-order reductions, no atomics).
  Kernels kernels = Kernels::kTorch;
  /// Attention: the unfused composite (any dtype and device) or flash (bf16 on CUDA).
  AttentionBackend attention_backend = AttentionBackend::kUnfused;

  // Mixture of Experts (DeepSeek-V3 style: sigmoid router, top-k, optional shared expert).
  // Megatron-LM TransformerConfig / --moe-* arguments; the defaults leave the model dense.
  int64_t num_moe_experts = 0;      ///< E routed experts; 0 = dense MLP in every layer
  int64_t moe_router_topk = 2;      ///< k experts per token
  int64_t moe_ffn_hidden_size = 0;  ///< F_moe per routed expert; 0 = ffn_hidden_size (Megatron)
  int64_t moe_shared_expert_intermediate_size = 0;  ///< F_sh of the shared expert; 0 = none
  /// Per decoder layer 1 = MoE, 0 = dense (Megatron --moe-layer-freq as a list). Empty: every
  /// layer is MoE when num_moe_experts > 0.
  std::vector<int> moe_layer_freq;
  /// Add moe_router_expert_bias to the scores for selection only (DeepSeek-V3 auxiliary-loss-free
  /// balancing). The bias is fixed here (Megatron updates it between steps).
  bool moe_router_enable_expert_bias = false;
  std::vector<double> moe_router_expert_bias;   ///< [E]; empty = zeros
  double moe_router_topk_scaling_factor = 1.0;  ///< gates × this after normalisation

  /// A planted bug (config/fault.h), kNone outside fault-injection scenarios. Not a
  /// hyperparameter: the record names it in its attribute "inject" when set.
  Fault inject = Fault::kNone;
  /// How the engine sums gradient contributions (enums.h); the chunk programs give each use of
  /// the word-embedding table its own leaf under kCanonical. Not a hyperparameter: set from the
  /// variant, named in the record's attribute "accumulation".
  Accumulation accumulation = Accumulation::kMegatron;

  int64_t kv_channels() const { return hidden_size / num_attention_heads; }  ///< hn
  /// F_moe with Megatron's default applied (moe_ffn_hidden_size, or ffn_hidden_size when 0).
  int64_t moe_expert_ffn_hidden_size() const {
    return moe_ffn_hidden_size > 0 ? moe_ffn_hidden_size : ffn_hidden_size;
  }
  /// Whether decoder layer `layer` (global, 0-based) has an MoE MLP.
  bool is_moe_layer(int64_t layer) const;
  /// Whether the MTP depths' transformer layers are MoE: they take the last decoder layer's kind
  /// (spec megatron_mtp_standalone.md §1.2).
  bool mtp_layer_is_moe() const { return is_moe_layer(num_layers - 1); }
  /// Throws InputError naming the field and the rule (positive sizes, H divisible by nh, nh
  /// divisible by ng, hn even for RoPE, λ finite and ≥ 0, eps > 0, vocab ≥ 1; MoE: 1 ≤ k ≤ E,
  /// sizes ≥ 0, moe_layer_freq of 0/1 with one entry per decoder layer, bias length E and finite,
  /// scaling factor finite and > 0).
  void validate() const;
};

/// Why `m` cannot be split over `cp` context-parallel ranks ("" when it can, and for cp = 1):
/// Megatron's load-balanced split gives each CP rank two of 2·cp equal sequence chunks, so
/// seq_length must be a multiple of 2·cp. The one statement of that rule: the run plan
/// (engine/plan.cc) and the simulator (sim/simulate.h) both ask it. Throws nothing.
std::string context_parallel_misfit(const ModelConfig& m, int cp);
/// Why `m`'s experts cannot be split over `ep` expert-parallel ranks ("" when they can, and for
/// ep = 1): there must be routed experts (num_moe_experts > 0) in at least one layer (decoder or
/// MTP), and E a multiple of ep (each EP rank holds E / ep of them). Asked by the run plan and the
/// simulator. Throws nothing.
std::string expert_parallel_misfit(const ModelConfig& m, int ep);

}  // namespace mtp::config
