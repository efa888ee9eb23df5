#include "harness/sim/activation.h"

#include <algorithm>

namespace mtp::sim {
namespace {

/// s / cp: the tokens of one context-parallel rank (cp divides s; a cp < 1 counts as 1).
uint64_t local_tokens(const config::ModelConfig& m, int cp) {
  return static_cast<uint64_t>(m.seq_length) / static_cast<uint64_t>(std::max(cp, 1));
}

}  // namespace

uint64_t layer_activation_bytes(const config::ModelConfig& m, bool moe, bool flash,
                                uint64_t element_bytes, int cp) {
  const uint64_t s = static_cast<uint64_t>(m.seq_length);
  const uint64_t sl = local_tokens(m, cp);
  const uint64_t b = static_cast<uint64_t>(m.micro_batch_size);
  const uint64_t h = static_cast<uint64_t>(m.hidden_size);
  const uint64_t a = static_cast<uint64_t>(m.num_attention_heads);
  uint64_t ffn = static_cast<uint64_t>(m.ffn_hidden_size);
  uint64_t router = 0;
  if (moe) {
    ffn = static_cast<uint64_t>(m.moe_router_topk * m.moe_expert_ffn_hidden_size() +
                                m.moe_shared_expert_intermediate_size);
    router = static_cast<uint64_t>(m.num_moe_experts) * sl * b * 4;
  }
  const uint64_t score_bytes = std::max<uint64_t>(element_bytes, 4);
  const uint64_t attention = flash ? a * sl * b * 4 : 2 * a * sl * s * b * score_bytes;
  const uint64_t gathered_kv =
      cp > 1
          ? 2 * s * b * static_cast<uint64_t>(m.num_query_groups * m.kv_channels()) * element_bytes
          : 0;
  return (13 * h + 3 * ffn) * sl * b * element_bytes + attention + router + gathered_kv;
}

uint64_t attention_workspace_bytes(const config::ModelConfig& m, uint64_t element_bytes) {
  if (m.attention_backend != config::AttentionBackend::kHarness) return 0;
  const uint64_t acc = element_bytes == 8 ? 8 : 4;
  const uint64_t pairs =
      static_cast<uint64_t>(m.micro_batch_size) * static_cast<uint64_t>(m.num_attention_heads);
  const uint64_t s = static_cast<uint64_t>(m.seq_length);
  return pairs * (2 * s * s + s) * acc;
}

uint64_t head_activation_bytes(const config::ModelConfig& m, uint64_t element_bytes, int cp) {
  const uint64_t sb = local_tokens(m, cp) * static_cast<uint64_t>(m.micro_batch_size);
  return sb * static_cast<uint64_t>(m.vocab_size) * (element_bytes + 8) +
         2 * sb * static_cast<uint64_t>(m.hidden_size) * element_bytes;
}

uint64_t stage_activation_bytes(const config::ModelConfig& m, const layout::StagePlan& st,
                                uint64_t element_bytes, int cp) {
  // The fused kernels (flash, harness) keep no [s, s] probabilities for the backward.
  const bool flash = m.attention_backend != config::AttentionBackend::kUnfused;
  const uint64_t sbh = local_tokens(m, cp) * static_cast<uint64_t>(m.micro_batch_size) *
                       static_cast<uint64_t>(m.hidden_size);
  uint64_t bytes = 0;
  if (st.has_embedding) bytes += sbh * element_bytes;
  for (int layer : st.decoder_layers) {
    bytes += layer_activation_bytes(m, m.is_moe_layer(layer), flash, element_bytes, cp);
  }
  for (size_t k = 0; k < st.mtp_depths.size(); ++k) {
    bytes += 6 * sbh * element_bytes +
             layer_activation_bytes(m, m.mtp_layer_is_moe(), flash, element_bytes, cp) +
             head_activation_bytes(m, element_bytes, cp);
  }
  if (st.has_loss) bytes += head_activation_bytes(m, element_bytes, cp);
  return bytes;
}

}  // namespace mtp::sim
