// Tests of the straight-line float64 oracle against the harness's own float64 training: step 1's
// losses and every main grad of a record agree within 1e-10 relative (the two differ only in the
// order of float64 sums), for a pipelined data-parallel candidate (GQA, D = 2), a tied reference
// and a MoE model (shared expert, expert bias, a dense first layer); and a planted change of one
// weight is seen.
#include "harness/oracle/oracle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <tuple>

#include "candidate/candidate.h"
#include "harness/config/param_specs.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/engine/trainer.h"
#include "harness/engine/weights_import.h"
#include "harness/record/record.h"
#include "reference/reference.h"

namespace mtp::oracle {
namespace {

struct Case {
  const char* name;
  config::ModelConfig model;
  config::Implementation impl;
  const char* layout;  // "" = P 1
  int pipeline_size;
  int data_parallel_size;
  int64_t num_microbatches = 4;  ///< M per data-parallel rank
  int context_parallel_size = 1;
};

/// Runs `c` for one step in float64 and returns its record's path.
std::string train(const Case& c) {
  config::TrainingConfig t;
  t.steps = 1;
  t.num_microbatches = c.num_microbatches;
  t.dtype = config::DType::kFloat64;
  config::VariantSpec v;
  v.name = c.name;
  v.implementation = c.impl;
  v.layout = c.layout;
  v.pipeline_size = c.pipeline_size;
  v.data_parallel_size = c.data_parallel_size;
  v.context_parallel_size = c.context_parallel_size;
  const auto impl = c.impl == config::Implementation::kCandidate ? candidate::make_candidate()
                                                                 : reference::make_reference();
  engine::RunOptions ro;
  ro.record_path =
      (std::filesystem::path(testing::TempDir()) / (std::string(c.name) + ".h5")).string();
  std::filesystem::remove(ro.record_path);
  engine::run_variant(engine::plan_variant(c.model, t, v, *impl), *impl, data::DataConfig{}, ro);
  return ro.record_path;
}

at::Tensor tensor(const record::RecordReader& r, int step, record::Group g, const std::string& n) {
  return engine::tensor_from_record(r.read(step, g, n)).to(at::kDouble);
}

StepInputs inputs(const record::RecordReader& r, const Case& c) {
  const config::ModelConfig& m = c.model;
  StepInputs in;
  in.model = m;
  in.num_microbatches = c.num_microbatches;
  in.context_parallel_size = c.context_parallel_size;
  for (const auto& spec : config::parameter_specs(m)) {
    in.weights[spec.name] = tensor(r, 0, record::Group::kWeight, spec.name);
  }
  auto batch = [&](int i) {
    return engine::tensor_from_record(
        r.read(1, record::Group::kBatch, record::kBatchTensorNames[i]));
  };
  in.tokens = batch(0);
  in.labels = batch(1);
  in.loss_mask = batch(2);
  return in;
}

void expect_oracle_agrees(const Case& c) {
  SCOPED_TRACE(c.name);
  const record::RecordReader r(train(c));
  const StepResult o = straight_line_step(inputs(r, c));
  auto loss = [&](const std::string& n) {
    return tensor(r, 1, record::Group::kLoss, n).item<double>();
  };
  EXPECT_NEAR(o.lm, loss(record::kLmLossName), 1e-12 * std::abs(o.lm));
  ASSERT_EQ(static_cast<int64_t>(o.mtp.size()), c.model.mtp_num_layers);
  for (size_t k = 0; k < o.mtp.size(); ++k) {
    EXPECT_NEAR(o.mtp[k], loss(record::mtp_loss_name(static_cast<int64_t>(k) + 1)),
                1e-12 * std::abs(o.mtp[k]));
  }
  EXPECT_NEAR(o.total, loss(record::kTotalLossName), 1e-12 * std::abs(o.total));
  int nonzero = 0;
  double worst = 0.0;
  std::string worst_name;
  for (const auto& spec : config::parameter_specs(c.model)) {
    const at::Tensor want = tensor(r, 1, record::Group::kGrad, spec.name);
    const at::Tensor& got = o.grads.at(spec.name);
    const double e = relative_l2(got, want);
    EXPECT_LT(e, 1e-10) << spec.name;
    if (e >= worst) std::tie(worst, worst_name) = std::make_tuple(e, spec.name);
    nonzero += want.abs().sum().item<double>() > 0 ? 1 : 0;
  }
  std::cout << c.name << ": worst main grad " << worst_name << " at " << worst
            << " relative L2; lm " << o.lm << "\n";
  EXPECT_GT(nonzero, static_cast<int>(config::parameter_specs(c.model).size()) / 2);
}

TEST(OracleTest, AgreesWithAPipelinedDataParallelCandidate) {
  config::ModelConfig m = config::testing::tiny_model();
  m.num_attention_heads = 4;
  m.num_query_groups = 2;  // two query heads per key/value head
  m.hidden_size = 32;
  expect_oracle_agrees(
      {"cand_p4v2_dp2", m, config::Implementation::kCandidate, "E|t*3|(t|)*4tmm|L", 4, 2});
}

// M = 3 and CP = 2: Megatron's MTP auto-scaler scale fl32(1/3)·2 is not 2/3, and a float64
// run's MTP grads carry that rounding (3e-8 relative), 250 times the float64 bound; the oracle
// applies it (StepInputs::num_microbatches), and without it would disagree.
TEST(OracleTest, AgreesWithThreeMicrobatchesUnderContextParallel) {
  const Case c{"ref_m3_cp2",
               config::testing::tiny_model(),
               config::Implementation::kReference,
               "",
               1,
               1,
               3,
               2};
  expect_oracle_agrees(c);
  const record::RecordReader r(train(c));
  StepInputs exact = inputs(r, c);
  exact.num_microbatches = 0;  // the exact 1/M
  const StepResult o = straight_line_step(exact);
  EXPECT_GT(relative_l2(o.grads.at("embedding.word_embeddings.weight"),
                        tensor(r, 1, record::Group::kGrad, "embedding.word_embeddings.weight")),
            1e-9);
}

TEST(OracleTest, AgreesWithATiedReference) {
  config::ModelConfig m = config::testing::tiny_model();
  m.untie_embeddings = false;
  expect_oracle_agrees({"ref_tied", m, config::Implementation::kReference, "", 1, 1});
}

TEST(OracleTest, AgreesWithAMixtureOfExpertsModel) {
  config::ModelConfig m = config::testing::tiny_model();
  m.num_layers = 3;
  m.mtp_num_layers = 1;
  m.num_moe_experts = 4;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 12;
  m.moe_shared_expert_intermediate_size = 8;
  m.moe_layer_freq = {0, 1, 1};
  m.moe_router_enable_expert_bias = true;
  m.moe_router_expert_bias = {0.01, -0.02, 0.0, 0.03};
  m.moe_router_topk_scaling_factor = 2.5;
  expect_oracle_agrees({"ref_moe", m, config::Implementation::kReference, "", 1, 1});
}

TEST(OracleTest, SeesAChangedWeightAndRefusesAMissingOne) {
  const Case c{
      "ref_plain", config::testing::tiny_model(), config::Implementation::kReference, "", 1, 1};
  const record::RecordReader r(train(c));
  StepInputs in = inputs(r, c);
  const StepResult before = straight_line_step(in);
  in.weights["decoder.layers.3.pre_mlp_layernorm.weight"] =
      in.weights["decoder.layers.3.pre_mlp_layernorm.weight"] * 1.001;
  const StepResult after = straight_line_step(in);
  EXPECT_NE(before.lm, after.lm);
  EXPECT_GT(relative_l2(after.grads.at("decoder.layers.3.mlp.linear_fc2.weight"),
                        before.grads.at("decoder.layers.3.mlp.linear_fc2.weight")),
            1e-6);
  in.weights.erase(config::kFinalLayernormName);
  EXPECT_THROW(straight_line_step(in), InputError);
}

}  // namespace
}  // namespace mtp::oracle
