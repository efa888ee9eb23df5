// File: harness/config/param_specs.h
//
// Global parameter names and shapes of the model a ModelConfig describes. Names and shapes are
// Megatron-LM's (megatron_conventions.md, "Parameter names and layouts").
// Canonical order (the order of records and of "first divergent tensor"): word embedding;
// decoder layers 0..N−1 (input_layernorm, self_attention.linear_qkv, self_attention.linear_proj,
// pre_mlp_layernorm, then the MLP: dense mlp.linear_fc1, mlp.linear_fc2; or MoE mlp.router.weight,
// mlp.experts.local_experts.<e>.linear_fc1/linear_fc2 for e = 0..E−1, then
// mlp.shared_experts.linear_fc1/linear_fc2 when a shared expert exists); decoder.final_layernorm;
// MTP depths 0..D−1 (enorm, hnorm, eh_proj, transformer_layer.*, final_layernorm; the layer has the
// last decoder layer's kind); output_layer (untied only). The MoE expert bias is a fixed config
// value, not a parameter. Initial values: harness/model/params.h. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/model_config.h"

namespace mtp::config {

/// One parameter of the full model.
struct ParamSpec {
  std::string name;  ///< global name, e.g. "decoder.layers.3.mlp.linear_fc1.weight"
  std::vector<int64_t> shape;
  double init_std = 0.0;  ///< 0 ⇒ initialised to ones (norm weights)
};

/// Names of one transformer layer's parameters under `prefix` ("decoder.layers.3." or
/// "mtp.layers.0.transformer_layer."), in canonical order. `is_moe`: the layer has an MoE MLP
/// (decoder layer i: cfg.is_moe_layer(i); MTP layers: cfg.mtp_layer_is_moe()); `cfg` gives the
/// number of experts and whether a shared expert exists.
std::vector<std::string> layer_param_names(const std::string& prefix, const ModelConfig& cfg,
                                           bool is_moe);

/// Specs (names, shapes, init) of one transformer layer's parameters; the names are
/// layer_param_names(prefix, cfg, is_moe).
std::vector<ParamSpec> layer_param_specs(const std::string& prefix, const ModelConfig& cfg,
                                         bool is_moe);

/// The parameter names of MTP depth `k` (0-based): Megatron-LM's MultiTokenPredictionLayer
/// (megatron/core/transformer/multi_token_prediction.py) under "mtp.layers.<k>.". The one place
/// these names are spelled (the specs, the chunks' name lists, the layer nodes and the reference
/// MTP forward read them here).
struct MtpLayerNames {
  std::string enorm;    ///< "mtp.layers.<k>.enorm.weight": RMSNorm of the embedding [H]
  std::string hnorm;    ///< "mtp.layers.<k>.hnorm.weight": RMSNorm of the hidden state [H]
  std::string eh_proj;  ///< "mtp.layers.<k>.eh_proj.weight": [H, 2H], no bias
  std::string transformer_layer;  ///< "mtp.layers.<k>.transformer_layer.": a prefix
  std::string final_layernorm;    ///< "mtp.layers.<k>.final_layernorm.weight": [H]
};
MtpLayerNames mtp_layer_names(int64_t k);

/// Every parameter of the model described by `cfg`, in canonical order.
std::vector<ParamSpec> parameter_specs(const ModelConfig& cfg);

/// Name of the word-embedding table (shared by the first stage and the MTP stage, and by the
/// output head when embeddings are tied).
inline const char* kWordEmbeddingName = "embedding.word_embeddings.weight";
inline const char* kOutputLayerName = "output_layer.weight";
inline const char* kFinalLayernormName = "decoder.final_layernorm.weight";

/// Routed expert e of a layer lives under <layer prefix> + kRoutedExpertInfix + "<e>." (Megatron
/// SequentialMLP local_experts; the harness keeps the global expert index in the name at every
/// expert-parallel size, as Megatron's distributed checkpoints do).
inline const char* kRoutedExpertInfix = "mlp.experts.local_experts.";
/// The global expert index of a routed expert's parameter name, or −1 for any other name.
int64_t routed_expert_index(const std::string& name);

}  // namespace mtp::config
