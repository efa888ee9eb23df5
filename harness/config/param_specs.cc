#include "harness/config/param_specs.h"

#include <fmt/format.h>

#include <cmath>

namespace mtp::config {

std::vector<ParamSpec> layer_param_specs(const std::string& prefix, const ModelConfig& cfg,
                                         bool is_moe) {
  const int64_t H = cfg.hidden_size, hn = cfg.kv_channels();
  const int64_t nh = cfg.num_attention_heads, ng = cfg.num_query_groups;
  const double std_in = 0.02;
  const double std_out = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.num_layers));
  std::vector<ParamSpec> out;
  out.push_back({prefix + "input_layernorm.weight", {H}, 0.0});
  out.push_back(
      {prefix + "self_attention.linear_qkv.weight", {ng * (nh / ng + 2) * hn, H}, std_in});
  out.push_back({prefix + "self_attention.linear_proj.weight", {H, nh * hn}, std_out});
  out.push_back({prefix + "pre_mlp_layernorm.weight", {H}, 0.0});
  // A SwiGLU MLP under `p`: fc1 [2F, H] (gate rows, then up rows), fc2 [H, F].
  auto swiglu = [&](const std::string& p, int64_t F) {
    out.push_back({p + "linear_fc1.weight", {2 * F, H}, std_in});
    out.push_back({p + "linear_fc2.weight", {H, F}, std_out});
  };
  if (!is_moe) {
    swiglu(prefix + "mlp.", cfg.ffn_hidden_size);
    return out;
  }
  // Megatron MoELayer: TopKRouter.weight, SequentialMLP local_experts, SharedExpertMLP.
  const int64_t E = cfg.num_moe_experts;
  out.push_back({prefix + "mlp.router.weight", {E, H}, std_in});
  for (int64_t e = 0; e < E; ++e) {
    swiglu(fmt::format("{}{}{}.", prefix, kRoutedExpertInfix, e), cfg.moe_expert_ffn_hidden_size());
  }
  if (cfg.moe_shared_expert_intermediate_size > 0) {
    swiglu(prefix + "mlp.shared_experts.", cfg.moe_shared_expert_intermediate_size);
  }
  return out;
}

std::vector<std::string> layer_param_names(const std::string& prefix, const ModelConfig& cfg,
                                           bool is_moe) {
  std::vector<std::string> names;
  for (auto& spec : layer_param_specs(prefix, cfg, is_moe)) names.push_back(std::move(spec.name));
  return names;
}

MtpLayerNames mtp_layer_names(int64_t k) {
  const std::string p = fmt::format("mtp.layers.{}.", k);
  return {p + "enorm.weight", p + "hnorm.weight", p + "eh_proj.weight", p + "transformer_layer.",
          p + "final_layernorm.weight"};
}

std::vector<ParamSpec> parameter_specs(const ModelConfig& cfg) {
  const int64_t H = cfg.hidden_size;
  const double std_in = 0.02;
  auto layer = [&](const std::string& prefix, bool is_moe, std::vector<ParamSpec>& out) {
    for (auto& spec : layer_param_specs(prefix, cfg, is_moe)) out.push_back(std::move(spec));
  };
  std::vector<ParamSpec> specs;
  specs.push_back({kWordEmbeddingName, {cfg.vocab_size, H}, std_in});
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    layer(fmt::format("decoder.layers.{}.", i), cfg.is_moe_layer(i), specs);
  }
  specs.push_back({kFinalLayernormName, {H}, 0.0});
  for (int64_t k = 0; k < cfg.mtp_num_layers; ++k) {
    const MtpLayerNames n = mtp_layer_names(k);
    specs.push_back({n.enorm, {H}, 0.0});
    specs.push_back({n.hnorm, {H}, 0.0});
    specs.push_back({n.eh_proj, {H, 2 * H}, std_in});
    layer(n.transformer_layer, cfg.mtp_layer_is_moe(), specs);
    specs.push_back({n.final_layernorm, {H}, 0.0});
  }
  if (cfg.untie_embeddings) specs.push_back({kOutputLayerName, {cfg.vocab_size, H}, std_in});
  return specs;
}

int64_t routed_expert_index(const std::string& name) {
  const size_t at = name.find(kRoutedExpertInfix);
  if (at == std::string::npos) return -1;
  size_t pos = at + std::string(kRoutedExpertInfix).size();
  int64_t e = 0;
  bool digits = false;
  for (; pos < name.size() && name[pos] >= '0' && name[pos] <= '9'; ++pos, digits = true) {
    e = e * 10 + (name[pos] - '0');
  }
  return digits && pos < name.size() && name[pos] == '.' ? e : -1;
}

}  // namespace mtp::config
