#include "harness/model/loss.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "harness/common/error.h"
#include "harness/model/layers.h"
#include "harness/model/mtp.h"
#include "kernels/ops.h"

namespace mtp::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct MtpLossAutoScaler : public torch::autograd::Function<MtpLossAutoScaler> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& main_hidden,
                            const at::Tensor& mtp_term, double scale) {
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["term_sizes"] = mtp_term.sizes().vec();
    ctx->saved_data["term_dtype"] = static_cast<int64_t>(mtp_term.scalar_type());
    return main_hidden;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const double scale = ctx->saved_data["scale"].toDouble();
    auto sizes = ctx->saved_data["term_sizes"].toIntVector();
    auto dtype = static_cast<at::ScalarType>(ctx->saved_data["term_dtype"].toInt());
    auto term_grad = at::ones(sizes, grad_outputs[0].options().dtype(dtype)) * scale;
    return {grad_outputs[0], term_grad, at::Tensor()};
  }
};

}  // namespace

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
  auto max = std::get<0>(logits.max(-1, /*keepdim=*/true)).detach();
  auto shifted = logits - max;
  auto log_sum_exp = shifted.exp().sum(-1).log();                          // [s, b]
  auto target = shifted.gather(-1, labels.t().unsqueeze(-1)).squeeze(-1);  // [s, b]
  return (log_sum_exp - target).t();                                       // [b, s]
}

at::Tensor mtp_loss_auto_scale(const at::Tensor& main_hidden, const at::Tensor& mtp_term,
                               double scale) {
  return MtpLossAutoScaler::apply(main_hidden, mtp_term, scale);
}

LossOutput loss_stage_forward(const std::vector<at::Tensor>& hidden, const at::Tensor& head_weight,
                              const LossInputs& mb, const config::ModelConfig& cfg,
                              int64_t num_microbatches) {
  const int64_t D = cfg.mtp_num_layers;
  MTP_INTERNAL_ASSERT(static_cast<int64_t>(hidden.size()) == 1 + D,
                      "loss stage needs 1 + D hidden chunks");
  LossOutput out;
  at::Tensor main = hidden[0];
  at::Tensor labels = mb.labels;
  at::Tensor mask = mb.loss_mask;
  // Planted bugs (config/fault.h) test cfg.inject where the bug would live; off by default.
  using config::Fault;
  const bool per_token = !mb.token_counts.empty();
  MTP_INTERNAL_ASSERT(!per_token || static_cast<int64_t>(mb.token_counts.size()) == 1 + D,
                      "the per-token loss needs 1 + D token counts");
  // Per-token: the auto-scaler's scale is 1 (schedules.py: set_loss_scale(loss_scale)).
  const float s_mtp = cfg.inject == Fault::kMtpScaleWithoutOneOverM || per_token
                          ? 1.0f
                          : 1.0f / static_cast<float>(num_microbatches);
  const double lambda_over_d = cfg.inject == Fault::kMtpScaleWithoutOneOverD
                                   ? cfg.mtp_loss_scaling_factor
                                   : cfg.mtp_loss_scaling_factor / static_cast<double>(D);
  if (cfg.inject == Fault::kMtpLabelsRolledOnceMore) {
    labels = roll_left(labels);
    mask = roll_left(mask);
  }
  for (int64_t k = 1; k <= D; ++k) {
    auto logits = loss_precision(linear_no_bias(hidden[k], head_weight));  // Megatron: .float()
    labels = roll_left(labels);
    mask = roll_left(mask);
    auto ce = (cfg.kernels == config::Kernels::kHarness ? kernels::cross_entropy(logits, labels)
                                                        : cross_entropy(logits, labels)) *
              mask;
    if (per_token) {
      // multi_token_prediction.py process_mtp_loss with calculate_per_token_loss: the masked
      // sum times N_0/max(N_k, 1), the counts of the global batch (the #7452 fix).
      const std::vector<double>& ratio =
          mb.mtp_ratio_counts.empty() ? mb.token_counts : mb.mtp_ratio_counts;
      const double nk = std::max(mb.token_counts[static_cast<size_t>(k)], 1.0);
      out.mtp.push_back(ce.sum() / nk);
      const double scale = ratio[0] / std::max(ratio[static_cast<size_t>(k)], 1.0);
      main = mtp_loss_auto_scale(main, lambda_over_d * ce * scale, static_cast<double>(s_mtp));
      continue;
    }
    auto num_tokens =
        (cfg.inject == Fault::kMtpLossMainMaskCount ? mb.loss_mask : mask).sum().clamp_min(1.0);
    out.mtp.push_back(ce.sum() / num_tokens);
    auto term = lambda_over_d * ce / num_tokens;
    main = mtp_loss_auto_scale(main, term, static_cast<double>(s_mtp));
  }
  auto logits = loss_precision(linear_no_bias(main, head_weight));
  auto ce = cfg.kernels == config::Kernels::kHarness ? kernels::cross_entropy(logits, mb.labels)
                                                     : cross_entropy(logits, mb.labels);
  auto loss_sum = (ce * mb.loss_mask).sum();
  if (per_token) {
    // pretrain_gpt.py loss_func: the masked sum; finalize_model_grads divides by N_0.
    out.lm = loss_sum / std::max(mb.token_counts[0], 1.0);
    out.objective = loss_sum;
    return out;
  }
  auto num_tokens = mb.loss_mask.sum().clamp_min(1.0);
  out.lm = loss_sum / num_tokens;
  out.objective = loss_sum / num_tokens / static_cast<double>(num_microbatches);
  return out;
}

}  // namespace mtp::model
