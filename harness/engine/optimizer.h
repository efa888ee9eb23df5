// File: harness/engine/optimizer.h
//
// Adam with decoupled weight decay (Megatron-LM's default optimizer, torch.optim.AdamW
// arithmetic), applied to the main grads finalize_model_grads left. One function holds the
// per-element arithmetic, so every optimizer of the harness (per parameter, sharded) gives the
// same bits for the same element.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/config/run_config.h"
#include "harness/engine/local_model.h"

namespace mtp::engine {

/// Adam's hyperparameters (TrainingConfig: lr, adam_beta1/2, adam_eps, weight_decay).
struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.0;
  static AdamHyper from(const config::TrainingConfig& t);
};

/// One Adam update of step `step` (≥ 1), in place, elementwise on tensors of one shape and dtype:
///   m ← β1·m + (1−β1)·g;   v ← β2·v + (1−β2)·g²;
///   u ← (m / (1−β1^step)) / (√(v / (1−β2^step)) + ε) [+ wd·w];   w ← w − lr·u.
/// Must run under NoGradGuard when `w` is a leaf that requires grad.
void adam_update(at::Tensor& w, const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                 int64_t step, const AdamHyper& hyper);

/// Adam over every parameter tensor a rank holds, one state per tensor. Every copy of a shared
/// parameter (the word-embedding table) is updated from the same summed main grad with its own
/// state, so the copies stay bitwise equal (Megatron-LM: one optimizer entry per copy).
class Adam {
 public:
  Adam(LocalModel& model, AdamHyper hyper);
  /// Updates every local parameter from its main grad (under NoGradGuard).
  void step(int64_t step);

 private:
  LocalModel& model_;
  AdamHyper hyper_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;  // per LocalModel::params entry
};

}  // namespace mtp::engine
