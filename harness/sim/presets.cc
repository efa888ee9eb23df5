#include "harness/sim/presets.h"

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp::sim {

std::vector<std::string> preset_names() { return {"dsv3", "small", "tiny"}; }

config::ModelConfig preset_model(const std::string& name) {
  if (name == "tiny") {  // a DeepSeek-V3-shaped toy: dense layer 0, MoE after, one MTP depth
    config::ModelConfig m;
    m.num_layers = 4;
    m.hidden_size = 64;
    m.num_attention_heads = 4;
    m.num_query_groups = 4;
    m.ffn_hidden_size = 128;
    m.vocab_size = 256;
    m.seq_length = 32;
    m.micro_batch_size = 2;
    m.mtp_num_layers = 1;
    m.num_moe_experts = 4;
    m.moe_router_topk = 2;
    m.moe_ffn_hidden_size = 32;
    m.moe_shared_expert_intermediate_size = 32;
    m.moe_layer_freq = {0, 1, 1, 1};
    return m;
  }
  if (name == "small") {  // train_step_benchmark's small model (dense, MHA, D = 1)
    config::ModelConfig m;
    m.num_layers = 8;
    m.hidden_size = 1024;
    m.num_attention_heads = 16;
    m.num_query_groups = 16;
    m.ffn_hidden_size = 2816;
    m.vocab_size = 32768;
    m.seq_length = 2048;
    m.micro_batch_size = 1;
    m.mtp_num_layers = 1;
    return m;
  }
  if (name != "dsv3") {
    throw InputError(
        fmt::format("preset \"{}\": accepted: {}", name, fmt::join(preset_names(), ", ")));
  }
  config::ModelConfig m;
  m.num_layers = 61;
  m.hidden_size = 7168;
  m.num_attention_heads = 128;
  m.num_query_groups = 128;
  m.ffn_hidden_size = 18432;
  m.vocab_size = 129280;
  m.seq_length = 4096;
  m.micro_batch_size = 1;
  m.mtp_num_layers = 1;
  m.mtp_loss_scaling_factor = 0.3;
  m.num_moe_experts = 256;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 2048;
  m.moe_shared_expert_intermediate_size = 2048;
  m.moe_layer_freq.assign(61, 1);
  for (int i = 0; i < 3; ++i) m.moe_layer_freq[static_cast<size_t>(i)] = 0;
  m.attention_backend = config::AttentionBackend::kFlash;
  return m;
}

}  // namespace mtp::sim
