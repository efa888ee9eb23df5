// File: harness/engine/testing/record_runs.h
//
// For engine tests that compare whole runs: run a variant with a full record under a test
// directory, and require two records bitwise equal, every tensor of every step's loss, grad,
// weight and model_weight groups (the tests of CUDA graphs and of the determinism settings).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "harness/data/token_source.h"
#include "harness/engine/plan.h"
#include "harness/engine/trainer.h"
#include "harness/record/record.h"

namespace mtp::engine::testing {

/// Runs `variant` of `model` / `training` (record forced to full) through `impl` with the
/// default data into `dir`/<variant name>.h5; returns the record's path. Throws what
/// plan_variant and run_variant throw.
inline std::string run_with_record(const config::ModelConfig& model,
                                   config::TrainingConfig training,
                                   const config::VariantSpec& variant, const Implementation& impl,
                                   const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  training.record = config::RecordMode::kFull;
  RunOptions ro;
  ro.record_path = (dir / (variant.name + ".h5")).string();
  ro.scenario_name = "test";
  run_variant(plan_variant(model, training, variant, impl), impl, data::DataConfig{}, ro);
  return ro.record_path;
}

/// EXPECTs every tensor of `a`'s loss, grad, weight and model_weight groups of steps 1..steps
/// bitwise equal to `b`'s (the failure names step, group and tensor); returns how many tensors
/// were compared.
inline int expect_records_bitwise_equal(const std::string& a, const std::string& b, int steps) {
  record::RecordReader ra(a), rb(b);
  int compared = 0;
  for (int step = 1; step <= steps; ++step) {
    for (const char* group : {"loss", "grad", "weight", "model_weight"}) {
      for (const auto& name : ra.names(step, group)) {
        EXPECT_EQ(ra.read(step, group, name).bytes, rb.read(step, group, name).bytes)
            << "step " << step << " " << group << "/" << name;
        ++compared;
      }
    }
  }
  return compared;
}

}  // namespace mtp::engine::testing
