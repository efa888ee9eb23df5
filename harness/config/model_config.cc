#include "harness/config/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "harness/common/error.h"

namespace mtp::config {

bool ModelConfig::is_moe_layer(int64_t layer) const {
  MTP_INTERNAL_ASSERT(
      layer >= 0 && layer < num_layers,
      fmt::format("is_moe_layer({}) outside 0..num_layers-1 = {}", layer, num_layers - 1));
  if (num_moe_experts == 0) return false;
  if (moe_layer_freq.empty()) return true;
  MTP_INTERNAL_ASSERT(static_cast<int64_t>(moe_layer_freq.size()) == num_layers,
                      "moe_layer_freq length != num_layers (validate() first)");
  return moe_layer_freq[static_cast<size_t>(layer)] == 1;
}

std::string context_parallel_misfit(const ModelConfig& m, int cp) {
  if (cp <= 1 || m.seq_length % (2 * cp) == 0) return "";
  return fmt::format(
      "needs seq_length to be a multiple of 2 · cp = {} (this model: {}): each CP rank holds two "
      "of 2 · cp equal chunks",
      2 * cp, m.seq_length);
}

std::string expert_parallel_misfit(const ModelConfig& m, int ep) {
  if (ep <= 1) return "";
  if (m.num_moe_experts == 0) {
    return "needs an MoE model (num_moe_experts > 0): there are no experts to split";
  }
  bool any_moe = false;
  for (int64_t l = 0; l < m.num_layers; ++l) any_moe = any_moe || m.is_moe_layer(l);
  if (!any_moe) {
    return "needs at least one MoE layer (moe_layer_freq is all 0): there are no experts to split";
  }
  if (m.num_moe_experts % ep != 0) {
    return fmt::format(
        "needs num_moe_experts ({}) to be a multiple of ep: each EP rank holds E / ep experts",
        m.num_moe_experts);
  }
  return "";
}

namespace {

void validate_moe(const ModelConfig& c) {
  MTP_CHECK(c.num_moe_experts >= 0,
            fmt::format("model: num_moe_experts = {} must be >= 0 (0 = dense)", c.num_moe_experts));
  MTP_CHECK(c.moe_ffn_hidden_size >= 0,
            fmt::format("model: moe_ffn_hidden_size = {} must be >= 0 (0 = ffn_hidden_size)",
                        c.moe_ffn_hidden_size));
  MTP_CHECK(c.moe_shared_expert_intermediate_size >= 0,
            fmt::format("model: moe_shared_expert_intermediate_size = {} must be >= 0 (0 = no "
                        "shared expert)",
                        c.moe_shared_expert_intermediate_size));
  MTP_CHECK(std::isfinite(c.moe_router_topk_scaling_factor) && c.moe_router_topk_scaling_factor > 0,
            fmt::format("model: moe_router_topk_scaling_factor = {} must be finite and > 0",
                        c.moe_router_topk_scaling_factor));
  for (size_t i = 0; i < c.moe_layer_freq.size(); ++i) {
    MTP_CHECK(c.moe_layer_freq[i] == 0 || c.moe_layer_freq[i] == 1,
              fmt::format("model: moe_layer_freq[{}] = {} must be 0 (dense) or 1 (MoE)", i,
                          c.moe_layer_freq[i]));
  }
  MTP_CHECK(
      c.moe_layer_freq.empty() || static_cast<int64_t>(c.moe_layer_freq.size()) == c.num_layers,
      fmt::format("model: moe_layer_freq has {} entries; it needs one per decoder layer "
                  "(num_layers = {})",
                  c.moe_layer_freq.size(), c.num_layers));
  for (size_t e = 0; e < c.moe_router_expert_bias.size(); ++e) {
    MTP_CHECK(std::isfinite(c.moe_router_expert_bias[e]),
              fmt::format("model: moe_router_expert_bias[{}] = {} must be finite", e,
                          c.moe_router_expert_bias[e]));
  }
  MTP_CHECK(c.moe_router_expert_bias.empty() || c.moe_router_enable_expert_bias,
            "model: moe_router_expert_bias is set but moe_router_enable_expert_bias = false");
  if (c.num_moe_experts == 0) {
    // Dense model: MoE-only settings would be silently ignored, so reject them.
    for (int v : c.moe_layer_freq) {
      MTP_CHECK(v != 1, "model: moe_layer_freq marks an MoE layer but num_moe_experts = 0");
    }
    MTP_CHECK(!c.moe_router_enable_expert_bias,
              "model: moe_router_enable_expert_bias = true but num_moe_experts = 0");
    return;
  }
  MTP_CHECK(c.moe_router_topk >= 1 && c.moe_router_topk <= c.num_moe_experts,
            fmt::format("model: moe_router_topk = {} must be in 1..num_moe_experts = {}",
                        c.moe_router_topk, c.num_moe_experts));
  MTP_CHECK(c.moe_router_expert_bias.empty() ||
                static_cast<int64_t>(c.moe_router_expert_bias.size()) == c.num_moe_experts,
            fmt::format("model: moe_router_expert_bias has {} entries; it needs one per expert "
                        "(num_moe_experts = {})",
                        c.moe_router_expert_bias.size(), c.num_moe_experts));
}

}  // namespace

void ModelConfig::validate() const {
  auto positive = [](const char* name, int64_t v) {
    MTP_CHECK(v >= 1, fmt::format("model: {} = {} must be >= 1", name, v));
  };
  auto at_most = [](const char* name, int64_t v, int64_t limit) {
    MTP_CHECK(v <= limit, fmt::format("model: {} = {} is larger than the harness supports ({})",
                                      name, v, limit));
  };
  at_most("num_layers", num_layers, 1024);
  at_most("hidden_size", hidden_size, 65536);
  at_most("ffn_hidden_size", ffn_hidden_size, int64_t{1} << 20);
  at_most("num_attention_heads", num_attention_heads, 1024);
  at_most("vocab_size", vocab_size, int64_t{1} << 22);
  at_most("seq_length", seq_length, int64_t{1} << 20);
  at_most("micro_batch_size", micro_batch_size, 65536);
  at_most("num_moe_experts", num_moe_experts, 1024);
  at_most("moe_ffn_hidden_size", moe_ffn_hidden_size, int64_t{1} << 20);
  at_most("moe_shared_expert_intermediate_size", moe_shared_expert_intermediate_size,
          int64_t{1} << 20);
  {
    // Whole-model size: parameters and one microbatch's logits, before anything is allocated.
    const double H = static_cast<double>(hidden_size), F = static_cast<double>(ffn_hidden_size);
    const double per_layer = 4 * H * H + 3 * H * std::max<double>(F, 1) +
                             std::max<int64_t>(num_moe_experts, 0) * 3 * H *
                                 static_cast<double>(moe_expert_ffn_hidden_size());
    const double params = 2 * static_cast<double>(vocab_size) * H +
                          (num_layers + std::max<int64_t>(mtp_num_layers, 0)) * per_layer;
    if (params > 5e9) {
      throw InputError(
          fmt::format("model: about {:.3g} parameters; the harness keeps weights, "
                      "grads and Adam state of every stage in memory and accepts at "
                      "most 5e9",
                      params));
    }
    const double logits = static_cast<double>(seq_length) * micro_batch_size * vocab_size;
    if (logits > 4.0e9) {
      throw InputError(
          fmt::format("model: seq_length · micro_batch_size · vocab_size = {:.3g} "
                      "logits per microbatch; at most 4e9",
                      logits));
    }
  }
  positive("num_layers", num_layers);
  positive("hidden_size", hidden_size);
  positive("ffn_hidden_size", ffn_hidden_size);
  positive("num_attention_heads", num_attention_heads);
  positive("num_query_groups", num_query_groups);
  positive("vocab_size", vocab_size);
  positive("seq_length", seq_length);
  positive("micro_batch_size", micro_batch_size);
  MTP_CHECK(mtp_num_layers >= 0,
            fmt::format("model: mtp_num_layers = {} must be >= 0", mtp_num_layers));
  MTP_CHECK(mtp_num_layers < seq_length,
            fmt::format("model: mtp_num_layers = {} must be < seq_length = {} (depth k predicts "
                        "token i+k+1)",
                        mtp_num_layers, seq_length));
  MTP_CHECK(hidden_size % num_attention_heads == 0,
            fmt::format("model: hidden_size = {} must be divisible by num_attention_heads = {}",
                        hidden_size, num_attention_heads));
  MTP_CHECK(num_attention_heads % num_query_groups == 0,
            fmt::format("model: num_attention_heads = {} must be divisible by "
                        "num_query_groups = {}",
                        num_attention_heads, num_query_groups));
  MTP_CHECK(kv_channels() % 2 == 0,
            fmt::format("model: kv_channels = hidden_size / num_attention_heads = {} must be even "
                        "for rotate-half RoPE",
                        kv_channels()));
  MTP_CHECK(std::isfinite(mtp_loss_scaling_factor) && mtp_loss_scaling_factor >= 0,
            fmt::format("model: mtp_loss_scaling_factor = {} must be finite and >= 0",
                        mtp_loss_scaling_factor));
  MTP_CHECK(norm_epsilon > 0 && std::isfinite(norm_epsilon),
            fmt::format("model: norm_epsilon = {} must be finite and > 0", norm_epsilon));
  MTP_CHECK(rotary_base > 1 && std::isfinite(rotary_base),
            fmt::format("model: rotary_base = {} must be finite and > 1", rotary_base));
  validate_moe(*this);
}

}  // namespace mtp::config
