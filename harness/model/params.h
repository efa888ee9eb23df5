// File: harness/model/params.h
//
// Global parameter names, shapes and layout-independent initial values.
// Names and shapes are Megatron-LM's (megatron_conventions.md, "Parameter names and layouts").
// Canonical order (the order of records and of "first divergent tensor"): word embedding;
// decoder layers 0..N−1 (input_layernorm, self_attention.linear_qkv, self_attention.linear_proj,
// pre_mlp_layernorm, mlp.linear_fc1, mlp.linear_fc2); decoder.final_layernorm; MTP depths
// 0..D−1 (enorm, hnorm, eh_proj, transformer_layer.*, final_layernorm); output_layer (untied only).
//
// Initial values depend only on (seed, global name, element index): each parameter has its own
// counter-based generator (xxHash3 of the name with the seed, splitmix64 per element, Box–Muller
// in double), so every layout, implementation, LibTorch version and device starts from the same
// bits. Distributions follow Megatron's init: N(0, 0.02) for embedding, linear_qkv, linear_fc1,
// eh_proj and output layer; N(0, 0.02/√(2N)) for linear_proj and linear_fc2; norms 1.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/model/config.h"

namespace mtp::model {

/// One parameter of the full model.
struct ParamSpec {
  std::string name;            ///< global name, e.g. "decoder.layers.3.mlp.linear_fc1.weight"
  std::vector<int64_t> shape;
  double init_std = 0.0;       ///< 0 ⇒ initialised to ones (norm weights)
};

/// Names of one transformer layer's parameters under `prefix` ("decoder.layers.3." or
/// "mtp.layers.0.transformer_layer."), in canonical order.
std::vector<std::string> layer_param_names(const std::string& prefix);

/// Every parameter of the model described by `cfg`, in canonical order.
std::vector<ParamSpec> parameter_specs(const ModelConfig& cfg);

/// The initial value of `spec` as a float64 CPU tensor (exact generator output); callers cast
/// to the model dtype. Depends only on (seed, spec.name, spec.shape, spec.init_std).
at::Tensor initial_value(const ParamSpec& spec, uint64_t seed);

/// Name of the word-embedding table (shared by the first stage and the MTP stage, and by the
/// output head when embeddings are tied).
inline const char* kWordEmbeddingName = "embedding.word_embeddings.weight";
inline const char* kOutputLayerName = "output_layer.weight";
inline const char* kFinalLayernormName = "decoder.final_layernorm.weight";

}  // namespace mtp::model
