#include "harness/perf/model_flops.h"

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp::perf {

StepFlops model_flops_per_step(const config::ModelConfig& cfg, int64_t samples) {
  cfg.validate();
  if (samples < 1) {
    throw InputError(fmt::format("model_flops_per_step: samples = {} must be >= 1", samples));
  }
  const double H = static_cast<double>(cfg.hidden_size);
  const double nh = static_cast<double>(cfg.num_attention_heads);
  const double ng = static_cast<double>(cfg.num_query_groups);
  const double hn = static_cast<double>(cfg.kv_channels());
  const double V = static_cast<double>(cfg.vocab_size);
  const double D = static_cast<double>(cfg.mtp_num_layers);
  const double s = static_cast<double>(cfg.seq_length);
  const double B = static_cast<double>(samples);
  double dense_layers = 0.0, moe_layers = 0.0;
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    (cfg.is_moe_layer(i) ? moe_layers : dense_layers) += 1.0;
  }
  (cfg.mtp_layer_is_moe() ? moe_layers : dense_layers) += D;
  const double attention_layers = static_cast<double>(cfg.num_layers) + D;
  const double k = cfg.num_moe_experts > 0 ? static_cast<double>(cfg.moe_router_topk) : 0.0;
  const double mlp = H * (3.0 * static_cast<double>(cfg.ffn_hidden_size) * dense_layers +
                          (3.0 * static_cast<double>(cfg.moe_expert_ffn_hidden_size()) * k +
                           3.0 * static_cast<double>(cfg.moe_shared_expert_intermediate_size)) *
                              moe_layers);
  const double projections = (H * (nh + 2.0 * ng) * hn + nh * hn * H) * attention_layers;
  const double mtp = D * (3.0 * H + 2.0 * H * H);
  const double logits = H * V * (D + 1.0);
  StepFlops f;
  f.token_linear = 6.0 * B * s * (mlp + projections + mtp + logits);
  f.attention = 6.0 * nh * hn * attention_layers * B * s * s;
  f.total = f.token_linear + f.attention;
  return f;
}

}  // namespace mtp::perf
