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
};

/// Runs `c` for one step in float64 and returns its record's path.
std::string train(const Case& c) {
  config::TrainingConfig t;
  t.steps = 1;
  t.num_microbatches = 4;
  t.dtype = config::DType::kFloat64;
  config::VariantSpec v;
  v.name = c.name;
  v.implementation = c.impl;
  v.layout = c.layout;
  v.pipeline_size = c.pipeline_size;
  v.data_parallel_size = c.data_parallel_size;
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

StepInputs inputs(const record::RecordReader& r, const config::ModelConfig& m) {
  StepInputs in;
  in.model = m;
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
  const StepResult o = straight_line_step(inputs(r, c.model));
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
  const config::ModelConfig m = config::testing::tiny_model();
  const record::RecordReader r(
      train({"ref_plain", m, config::Implementation::kReference, "", 1, 1}));
  StepInputs in = inputs(r, m);
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
