// File: harness/model/config.h
//
// Hyperparameters of the DeepSeek-V3-style GPT with Multi-Token Prediction that both
// implementations train, under Megatron-LM's argument names (megatron_conventions.md).
#pragma once

#include <cstdint>
#include <string>

namespace mtp::model {

/// Model hyperparameters. Names follow Megatron-LM's TransformerConfig / arguments.
struct ModelConfig {
  int64_t num_layers = 8;            ///< N, decoder layers of the trunk
  int64_t hidden_size = 64;          ///< H
  int64_t ffn_hidden_size = 128;     ///< F (SwiGLU: fc1 has 2F rows)
  int64_t num_attention_heads = 4;   ///< nh
  int64_t num_query_groups = 4;      ///< ng (GQA); = nh for plain multi-head attention
  int64_t vocab_size = 256;          ///< V (byte-level tokens need ≥ 256)
  int64_t seq_length = 32;           ///< s
  int64_t micro_batch_size = 2;      ///< b
  int64_t mtp_num_layers = 2;        ///< D, MTP depths (0 = no MTP)
  double mtp_loss_scaling_factor = 0.1;  ///< λ
  double rotary_base = 10000.0;
  double norm_epsilon = 1e-5;
  bool untie_embeddings = true;      ///< false: output head uses the word-embedding table

  int64_t kv_channels() const { return hidden_size / num_attention_heads; }  ///< hn
  /// Throws InputError naming the field and the rule (positive sizes, H divisible by nh, nh
  /// divisible by ng, hn even for RoPE, λ finite and ≥ 0, eps > 0, vocab ≥ 1).
  void validate() const;
};

}  // namespace mtp::model
