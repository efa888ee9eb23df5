// estimate_resources: parameter and optimizer terms against closed forms, activation peaks
// against 1F1B's in-flight count (P − rank microbatches), the record size against a real
// record, and require_resources' refusal.
#include "harness/engine/resource_estimate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "candidate/candidate.h"
#include "harness/common/error.h"
#include "harness/config/param_specs.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/engine/trainer.h"
#include "harness/sim/activation.h"
#include "reference/reference.h"

namespace mtp::engine {
namespace {

using ::testing::HasSubstr;

RunPlan plan_of(const char* layout, int pp, int dp, int64_t microbatches,
                config::Optimizer optimizer = config::Optimizer::kAdam,
                config::DType dtype = config::DType::kFloat32,
                std::optional<config::AttentionBackend> attention = std::nullopt) {
  config::TrainingConfig t;
  t.steps = 2;
  t.num_microbatches = microbatches;
  t.dtype = dtype;
  config::VariantSpec v;
  v.name = "v";
  v.implementation = config::Implementation::kReference;
  v.layout = layout;
  v.pipeline_size = pp;
  v.data_parallel_size = dp;
  v.optimizer = optimizer;
  v.attention_backend = attention;
  return plan_variant(config::testing::tiny_model(), t, v, *reference::make_reference());
}

uint64_t parameter_count() {
  uint64_t n = 0;
  for (const auto& s : config::parameter_specs(config::testing::tiny_model())) {
    uint64_t k = 1;
    for (int64_t d : s.shape) k *= static_cast<uint64_t>(d);
    n += k;
  }
  return n;
}

TEST(ResourceEstimateTest, OneRankHoldsEveryParameterOnceWithAdamState) {
  const auto impl = reference::make_reference();
  const ResourceEstimate e = estimate_resources(plan_of("Et*8mmL", 1, 1, 2), *impl);
  const uint64_t n = parameter_count();
  EXPECT_EQ(e.parameters, n);
  EXPECT_EQ(e.weight_bytes, 4 * n);     // fp32
  EXPECT_EQ(e.grad_bytes, 8 * n);       // main grad + autograd .grad
  EXPECT_EQ(e.optimizer_bytes, 8 * n);  // exp_avg + exp_avg_sq
  EXPECT_GT(e.activation_bytes, 0u);
  ASSERT_EQ(e.per_rank_bytes.size(), 1u);
  EXPECT_EQ(e.per_rank_bytes[0], e.memory_bytes());
  // bf16: 2-byte weights, fp32 main grads, fp32 masters beside the moments.
  const ResourceEstimate b = estimate_resources(
      plan_of("Et*8mmL", 1, 1, 2, config::Optimizer::kAdam, config::DType::kBFloat16), *impl);
  EXPECT_EQ(b.weight_bytes, 2 * n);
  EXPECT_EQ(b.grad_bytes, 6 * n);
  EXPECT_EQ(b.optimizer_bytes, 12 * n);
}

TEST(ResourceEstimateTest, OneFOneBHoldsPMinusRankMicrobatchesInFlight) {
  const auto impl = reference::make_reference();
  // P = 2, 1F1B: with M = 1 each rank holds one microbatch; with M = 4 rank 0 holds 2 (its one
  // warm-up forward and the steady-state forward) and rank 1 still 1.
  const ResourceEstimate one = estimate_resources(plan_of("Et*4|t*4mmL", 2, 1, 1), *impl);
  const ResourceEstimate four = estimate_resources(plan_of("Et*4|t*4mmL", 2, 1, 4), *impl);
  const int64_t d0 =
      static_cast<int64_t>(four.per_rank_bytes[0]) - static_cast<int64_t>(one.per_rank_bytes[0]);
  const int64_t d1 =
      static_cast<int64_t>(four.per_rank_bytes[1]) - static_cast<int64_t>(one.per_rank_bytes[1]);
  // Everything but activations is the same for M = 1 and M = 4, so with A0, A1 the chunks'
  // activations per microbatch: M = 1 holds A0 + A1, M = 4 holds 2·A0 + A1.
  EXPECT_EQ(d1, 0);
  EXPECT_GT(d0, 0);
  EXPECT_EQ(static_cast<int64_t>(four.activation_bytes - one.activation_bytes), d0);
  EXPECT_GT(one.activation_bytes, static_cast<uint64_t>(d0));  // A1 > 0
}

TEST(ResourceEstimateTest, TheHarnessAttentionAddsItsScratchOncePerRank) {
  const auto impl = reference::make_reference();
  const RunPlan h = plan_of("Et*8mmL", 1, 1, 2, config::Optimizer::kAdam, config::DType::kFloat32,
                            config::AttentionBackend::kHarness);
  // Closed form: b·a (sample, head) pairs, each two [s, s] fp32 scratch tensors and an [s] D.
  const uint64_t b = static_cast<uint64_t>(h.model.micro_batch_size);
  const uint64_t a = static_cast<uint64_t>(h.model.num_attention_heads);
  const uint64_t sq = static_cast<uint64_t>(h.model.seq_length);
  const uint64_t ws = b * a * (2 * sq * sq + sq) * 4;
  EXPECT_EQ(sim::attention_workspace_bytes(h.model, 4), ws);
  EXPECT_EQ(sim::attention_workspace_bytes(h.model, 8), 2 * ws);  // fp64 scratch
  EXPECT_EQ(sim::attention_workspace_bytes(plan_of("Et*8mmL", 1, 1, 2).model, 4), 0u);
  // P = 1: one microbatch in flight, its saved activations (no [s, s] probabilities kept) plus
  // the scratch of one call.
  const ResourceEstimate e = estimate_resources(h, *impl);
  EXPECT_EQ(e.activation_bytes, sim::stage_activation_bytes(h.model, h.layout.at(0, 0), 4) + ws);
}

TEST(ResourceEstimateTest, DistributedAdamShardsTheMomentsOverDataParallelRanks) {
  const auto impl = reference::make_reference();
  const uint64_t n = parameter_count();
  const ResourceEstimate plain = estimate_resources(plan_of("Et*8mmL", 1, 2, 2), *impl);
  const ResourceEstimate dist =
      estimate_resources(plan_of("Et*8mmL", 1, 2, 2, config::Optimizer::kDistributedAdam), *impl);
  EXPECT_EQ(plain.weight_bytes, 2 * 4 * n);  // two replicas
  EXPECT_EQ(plain.optimizer_bytes, 2 * 8 * n);
  // Per replica: moments / 2, plus the flat fp32 masters and the all-gather buffer.
  EXPECT_EQ(dist.optimizer_bytes, 2 * (8 * n / 2 + 8 * n));
}

TEST(ResourceEstimateTest, RecordEstimateIsWithinTenPercentOfARealRecord) {
  const RunPlan plan = plan_of("Et*4|t*4mmL", 2, 1, 2);
  const auto impl = reference::make_reference();
  const ResourceEstimate e = estimate_resources(plan, *impl);
  RunOptions ro;
  ro.record_path = (std::filesystem::path(testing::TempDir()) / "estimate.h5").string();
  run_variant(plan, *impl, data::DataConfig{}, ro);
  const double actual = static_cast<double>(std::filesystem::file_size(ro.record_path));
  EXPECT_NEAR(static_cast<double>(e.record_bytes), actual, 0.1 * actual);
}

TEST(ResourceEstimateTest, RequireResourcesRefusesWithTheEstimateAndTheLimit) {
  const ResourceEstimate e =
      estimate_resources(plan_of("Et*8mmL", 1, 1, 2), *reference::make_reference());
  try {
    require_resources(e, true, e.memory_bytes() - 1, "--max-memory", 0,
                      "s.toml:3:1: variant \"v\"");
    FAIL() << "no error";
  } catch (const InputError& err) {
    EXPECT_THAT(err.what(), HasSubstr("s.toml:3:1: variant \"v\": needs about"));
    EXPECT_THAT(err.what(), HasSubstr("but --max-memory is"));
    EXPECT_THAT(err.what(), HasSubstr(std::to_string(e.parameters) + " parameters"));
  }
  EXPECT_THROW(require_resources(e, true, 0, "", e.record_bytes - 1, "w"), InputError);
  EXPECT_NO_THROW(require_resources(e, true, e.memory_bytes(), "m", e.record_bytes, "w"));
  EXPECT_NO_THROW(require_resources(e, true, 0, "m", 0, "w"));  // 0: not checked
}

TEST(ResourceEstimateTest, FormatBytes) {
  EXPECT_EQ(format_bytes(900), "900 B");
  EXPECT_EQ(format_bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
  EXPECT_EQ(format_bytes(uint64_t{5} << 30), "5.0 GiB");
}

}  // namespace
}  // namespace mtp::engine
