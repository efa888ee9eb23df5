#include "harness/model/params.h"

#include <xxhash.h>

#include <cmath>

#include <fmt/format.h>

namespace mtp::model {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A double in (0, 1] from the top 53 bits.
double unit_open_closed(uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }
// A double in [0, 1) from the top 53 bits.
double unit_closed_open(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace

std::vector<std::string> layer_param_names(const std::string& prefix) {
  return {prefix + "input_layernorm.weight",   prefix + "self_attention.linear_qkv.weight",
          prefix + "self_attention.linear_proj.weight", prefix + "pre_mlp_layernorm.weight",
          prefix + "mlp.linear_fc1.weight",    prefix + "mlp.linear_fc2.weight"};
}

std::vector<ParamSpec> parameter_specs(const ModelConfig& cfg) {
  const int64_t H = cfg.hidden_size, F = cfg.ffn_hidden_size, hn = cfg.kv_channels();
  const int64_t nh = cfg.num_attention_heads, ng = cfg.num_query_groups;
  const double std_in = 0.02;
  const double std_out = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.num_layers));
  auto layer = [&](const std::string& prefix, std::vector<ParamSpec>& out) {
    auto n = layer_param_names(prefix);
    out.push_back({n[0], {H}, 0.0});
    out.push_back({n[1], {ng * (nh / ng + 2) * hn, H}, std_in});
    out.push_back({n[2], {H, nh * hn}, std_out});
    out.push_back({n[3], {H}, 0.0});
    out.push_back({n[4], {2 * F, H}, std_in});
    out.push_back({n[5], {H, F}, std_out});
  };
  std::vector<ParamSpec> specs;
  specs.push_back({kWordEmbeddingName, {cfg.vocab_size, H}, std_in});
  for (int64_t i = 0; i < cfg.num_layers; ++i) layer(fmt::format("decoder.layers.{}.", i), specs);
  specs.push_back({kFinalLayernormName, {H}, 0.0});
  for (int64_t k = 0; k < cfg.mtp_num_layers; ++k) {
    const std::string p = fmt::format("mtp.layers.{}.", k);
    specs.push_back({p + "enorm.weight", {H}, 0.0});
    specs.push_back({p + "hnorm.weight", {H}, 0.0});
    specs.push_back({p + "eh_proj.weight", {H, 2 * H}, std_in});
    layer(p + "transformer_layer.", specs);
    specs.push_back({p + "final_layernorm.weight", {H}, 0.0});
  }
  if (cfg.untie_embeddings) specs.push_back({kOutputLayerName, {cfg.vocab_size, H}, std_in});
  return specs;
}

at::Tensor initial_value(const ParamSpec& spec, uint64_t seed) {
  auto t = at::empty(spec.shape, at::TensorOptions().dtype(at::kDouble));
  double* p = t.data_ptr<double>();
  const int64_t n = t.numel();
  if (spec.init_std == 0.0) {
    for (int64_t i = 0; i < n; ++i) p[i] = 1.0;
    return t;
  }
  const uint64_t key = XXH3_64bits_withSeed(spec.name.data(), spec.name.size(), seed);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t a = splitmix64(key + 2 * static_cast<uint64_t>(i));
    const uint64_t b = splitmix64(key + 2 * static_cast<uint64_t>(i) + 1);
    const double r = std::sqrt(-2.0 * std::log(unit_open_closed(a)));
    p[i] = spec.init_std * r * std::cos(kTwoPi * unit_closed_open(b));
  }
  return t;
}

}  // namespace mtp::model
