#include "harness/config/run_config.h"

#include <fmt/format.h>

namespace mtp::config {

ModelConfig variant_model(const ModelConfig& model, const VariantSpec& variant) {
  ModelConfig m = model;
  if (variant.mtp_loss_scaling_factor) m.mtp_loss_scaling_factor = *variant.mtp_loss_scaling_factor;
  if (variant.mtp_num_layers) m.mtp_num_layers = *variant.mtp_num_layers;
  if (variant.inject) m.inject = *variant.inject;
  if (variant.accumulation) m.accumulation = *variant.accumulation;
  if (variant.kernels) m.kernels = *variant.kernels;
  if (variant.attention_backend) m.attention_backend = *variant.attention_backend;
  if (variant.untie_embeddings) m.untie_embeddings = *variant.untie_embeddings;
  if (variant.calculate_per_token_loss) {
    m.calculate_per_token_loss = *variant.calculate_per_token_loss;
  }
  return m;
}

void clear_model_overrides(VariantSpec& variant) {
  variant.mtp_loss_scaling_factor.reset();
  variant.mtp_num_layers.reset();
  variant.kernels.reset();
  variant.attention_backend.reset();
  variant.untie_embeddings.reset();
  variant.calculate_per_token_loss.reset();
}

int64_t variant_num_microbatches(const TrainingConfig& training, const ModelConfig& model,
                                 const VariantSpec& variant) {
  if (!training.global_batch_size) {
    if (training.num_microbatches < 1) {
      throw InputError(
          fmt::format("training: num_microbatches = {} must be >= 1", training.num_microbatches));
    }
    return training.num_microbatches;
  }
  const int64_t gbs = *training.global_batch_size;
  const int64_t per_step = model.micro_batch_size * variant.data_parallel_size;
  if (gbs < 1 || per_step < 1 || gbs % per_step != 0) {
    throw InputError(fmt::format(
        "variant \"{}\": global_batch_size = {} is not divisible by micro_batch_size ({}) times "
        "data-parallel size ({}) (Megatron's rule)",
        variant.name, gbs, model.micro_batch_size, variant.data_parallel_size));
  }
  return gbs / per_step;
}

}  // namespace mtp::config
