#include "harness/model/config.h"

#include <fmt/format.h>

#include <cmath>

#include "harness/common/error.h"

namespace mtp::model {

void ModelConfig::validate() const {
  auto positive = [](const char* name, int64_t v) {
    if (v < 1) throw InputError(fmt::format("model: {} = {} must be >= 1", name, v));
  };
  positive("num_layers", num_layers);
  positive("hidden_size", hidden_size);
  positive("ffn_hidden_size", ffn_hidden_size);
  positive("num_attention_heads", num_attention_heads);
  positive("num_query_groups", num_query_groups);
  positive("vocab_size", vocab_size);
  positive("seq_length", seq_length);
  positive("micro_batch_size", micro_batch_size);
  if (mtp_num_layers < 0) {
    throw InputError(fmt::format("model: mtp_num_layers = {} must be >= 0", mtp_num_layers));
  }
  if (mtp_num_layers >= seq_length) {
    throw InputError(fmt::format(
        "model: mtp_num_layers = {} must be < seq_length = {} (depth k predicts token i+k+1)",
        mtp_num_layers, seq_length));
  }
  if (hidden_size % num_attention_heads != 0) {
    throw InputError(fmt::format("model: hidden_size = {} must be divisible by "
                                 "num_attention_heads = {}", hidden_size, num_attention_heads));
  }
  if (num_attention_heads % num_query_groups != 0) {
    throw InputError(fmt::format("model: num_attention_heads = {} must be divisible by "
                                 "num_query_groups = {}", num_attention_heads, num_query_groups));
  }
  if (kv_channels() % 2 != 0) {
    throw InputError(fmt::format("model: kv_channels = hidden_size / num_attention_heads = {} "
                                 "must be even for rotate-half RoPE", kv_channels()));
  }
  if (!std::isfinite(mtp_loss_scaling_factor) || mtp_loss_scaling_factor < 0) {
    throw InputError(fmt::format("model: mtp_loss_scaling_factor = {} must be finite and >= 0",
                                 mtp_loss_scaling_factor));
  }
  if (!(norm_epsilon > 0) || !std::isfinite(norm_epsilon)) {
    throw InputError(fmt::format("model: norm_epsilon = {} must be finite and > 0", norm_epsilon));
  }
  if (!(rotary_base > 1) || !std::isfinite(rotary_base)) {
    throw InputError(fmt::format("model: rotary_base = {} must be finite and > 1", rotary_base));
  }
}

}  // namespace mtp::model
