#include "harness/engine/optimizer.h"

#include <c10/core/GradMode.h>

#include <cmath>

namespace mtp::engine {

AdamHyper AdamHyper::from(const config::TrainingConfig& t) {
  return {t.lr, t.adam_beta1, t.adam_beta2, t.adam_eps, t.weight_decay};
}

void adam_update(at::Tensor& w, const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                 int64_t step, const AdamHyper& h) {
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
  exp_avg.mul_(h.beta1).add_(g, 1.0 - h.beta1);
  exp_avg_sq.mul_(h.beta2).addcmul_(g, g, 1.0 - h.beta2);
  auto update = (exp_avg / bc1) / ((exp_avg_sq / bc2).sqrt() + h.eps);
  if (h.weight_decay != 0.0) update = update + h.weight_decay * w;
  w.sub_(h.lr * update);
}

Adam::Adam(LocalModel& model, AdamHyper hyper) : model_(model), hyper_(hyper) {
  for (const auto& p : model_.params) {
    exp_avg_.push_back(at::zeros_like(p.weight));
    exp_avg_sq_.push_back(at::zeros_like(p.weight));
  }
}

void Adam::step(int64_t step) {
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < model_.params.size(); ++i) {
    LocalParam& p = model_.params[i];
    adam_update(p.weight, p.main_grad, exp_avg_[i], exp_avg_sq_[i], step, hyper_);
  }
}

}  // namespace mtp::engine
