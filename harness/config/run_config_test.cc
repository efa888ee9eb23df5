// Tests of the variant-level resolution in run_config.h: model overrides and M from the global
// batch (Megatron: global_batch_size = M · micro_batch_size · DP).
#include "harness/config/run_config.h"

#include <gtest/gtest.h>

#include <string>

namespace mtp::config {
namespace {

TEST(RunConfigTest, VariantModelAppliesOnlyTheGivenOverrides) {
  ModelConfig m;
  VariantSpec v;
  EXPECT_EQ(variant_model(m, v).untie_embeddings, true);
  v.untie_embeddings = false;
  v.mtp_loss_scaling_factor = 0.3;
  v.kernels = Kernels::kHarness;
  const ModelConfig o = variant_model(m, v);
  EXPECT_FALSE(o.untie_embeddings);
  EXPECT_EQ(o.mtp_loss_scaling_factor, 0.3);
  EXPECT_EQ(o.kernels, Kernels::kHarness);
  EXPECT_EQ(o.hidden_size, m.hidden_size);
}

TEST(RunConfigTest, MicrobatchesFromTheGlobalBatch) {
  TrainingConfig t;
  ModelConfig m;  // micro_batch_size 2
  VariantSpec v;
  v.name = "x";
  EXPECT_EQ(variant_num_microbatches(t, m, v), 8);  // num_microbatches
  t.global_batch_size = 16;
  EXPECT_EQ(variant_num_microbatches(t, m, v), 8);
  v.data_parallel_size = 2;
  EXPECT_EQ(variant_num_microbatches(t, m, v), 4);
  v.data_parallel_size = 3;
  try {
    variant_num_microbatches(t, m, v);
    ADD_FAILURE() << "16 samples split over 3 x 2";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("global_batch_size = 16 is not divisible by "
                                         "micro_batch_size (2) times data-parallel size (3)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mtp::config
