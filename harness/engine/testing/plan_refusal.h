// File: harness/engine/testing/plan_refusal.h
//
// For planner tests: the InputError text of planning a variant, "" when it plans. The tests of
// each precondition family (cuda_graphs, context parallelism) break one rule at a time and check
// that the refusal names it.
#pragma once

#include <string>

#include "harness/common/error.h"
#include "harness/engine/plan.h"

namespace mtp::engine::testing {

inline std::string plan_refusal(const config::ModelConfig& model,
                                const config::TrainingConfig& training,
                                const config::VariantSpec& variant, const Implementation& impl) {
  try {
    plan_variant(model, training, variant, impl);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace mtp::engine::testing
