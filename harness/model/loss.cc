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

/// The whole sequence's copy of a per-token tensor x [b, s/CP] (CP rank shards), laid out in
/// memory as x is (x may be the transpose of a contiguous [s, b]), so that a reduction over it
/// visits the elements in the order the same tensor of a CP = 1 run would.
at::Tensor whole_sequence(const at::Tensor& x, ContextParallel& cp) {
  at::Tensor full = cp.gather_sequence(x, 1);  // [b, s], contiguous
  if (x.dim() == 2 && x.stride(1) != 1) full = full.t().contiguous().t();
  return full;
}

}  // namespace

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
  auto max = std::get<0>(logits.max(-1, /*keepdim=*/true)).detach();
  auto shifted = logits - max;
  auto log_sum_exp = shifted.exp().sum(-1).log();                          // [s, b]
  auto target = shifted.gather(-1, labels.t().unsqueeze(-1)).squeeze(-1);  // [s, b]
  return (log_sum_exp - target).t();                                       // [b, s]
}

namespace {

/// The per-token cross entropy of a head's logits [s, b, V] in the model dtype: ce [b, s],
/// fp32 (fp64 for fp64). Megatron takes it of logits.float(): LibTorch's composite does so;
/// the harness kernel takes the bf16 logits themselves, widening each element exactly as it
/// loads it, and its backward rounds the fp32 gradient to bf16 as the cast's backward would:
/// the same bits without the two [s, b, V] casts (KernelOpsCudaTest.
/// CrossEntropyOfBf16LogitsIsBitwiseTheFloatCast), ~5 ms of the small model's 100 ms step.
at::Tensor head_cross_entropy(const at::Tensor& logits, const at::Tensor& labels,
                              const config::ModelConfig& cfg) {
  if (cfg.kernels == config::Kernels::kHarness) return kernels::cross_entropy(logits, labels);
  return cross_entropy(loss_precision(logits), labels);
}

}  // namespace

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
  ContextParallel* cp = mb.cp != nullptr && mb.cp->size() > 1 ? mb.cp : nullptr;
  const double cp_size = cp != nullptr ? static_cast<double>(cp->size()) : 1.0;
  MTP_INTERNAL_ASSERT(
      cp == nullptr || static_cast<int64_t>(mb.sequence_token_counts.size()) == 1 + D,
      "a context-parallel loss stage needs 1 + D whole-sequence token counts");
  // Σ over the whole sequence of a masked per-token loss [b, s/CP] (gathered with CP).
  auto sequence_sum = [cp](const at::Tensor& masked) {
    return cp != nullptr ? whole_sequence(masked, *cp).sum() : masked.sum();
  };
  // The whole sequence's count of depth k's mask (≥ 1), a 0-dim tensor like mask.sum().
  auto count = [&](const at::Tensor& m, int64_t k) {
    if (cp == nullptr) return m.sum().clamp_min(1.0);
    return at::scalar_tensor(mb.sequence_token_counts[static_cast<size_t>(k)], m.options())
        .clamp_min(1.0);
  };
  const bool per_token = !mb.token_counts.empty();
  MTP_INTERNAL_ASSERT(!per_token || static_cast<int64_t>(mb.token_counts.size()) == 1 + D,
                      "the per-token loss needs 1 + D token counts");
  // Per-token: the auto-scaler's scale is 1 (schedules.py: set_loss_scale(loss_scale)).
  float s_mtp = cfg.inject == Fault::kMtpScaleWithoutOneOverM || per_token
                    ? 1.0f
                    : 1.0f / static_cast<float>(num_microbatches);
  // CP > 1: × CP, which the engine's ÷ DP·CP cancels (planted #3943: not multiplied).
  if (!per_token && cfg.inject != Fault::kMtpLossScaleWithoutCp) {
    s_mtp *= static_cast<float>(cp_size);
  }
  const double lambda_over_d = cfg.inject == Fault::kMtpScaleWithoutOneOverD
                                   ? cfg.mtp_loss_scaling_factor
                                   : cfg.mtp_loss_scaling_factor / static_cast<double>(D);
  if (cfg.inject == Fault::kMtpLabelsRolledOnceMore) {
    labels = roll_sequence_left(labels, cp);
    mask = roll_sequence_left(mask, cp);
  }
  for (int64_t k = 1; k <= D; ++k) {
    labels = roll_sequence_left(labels, cp);
    mask = roll_sequence_left(mask, cp);
    auto ce = head_cross_entropy(linear_no_bias(hidden[k], head_weight), labels, cfg) * mask;
    if (per_token) {
      // multi_token_prediction.py process_mtp_loss with calculate_per_token_loss: the masked
      // sum times N_0/max(N_k, 1), the counts of the global batch (the #7452 fix).
      const std::vector<double>& ratio =
          mb.mtp_ratio_counts.empty() ? mb.token_counts : mb.mtp_ratio_counts;
      const double nk = std::max(mb.token_counts[static_cast<size_t>(k)], 1.0);
      out.mtp.push_back(sequence_sum(ce) / nk);
      const double scale = ratio[0] / std::max(ratio[static_cast<size_t>(k)], 1.0);
      main = mtp_loss_auto_scale(main, lambda_over_d * ce * scale, static_cast<double>(s_mtp));
      continue;
    }
    auto num_tokens =
        cfg.inject == Fault::kMtpLossMainMaskCount ? count(mb.loss_mask, 0) : count(mask, k);
    out.mtp.push_back(sequence_sum(ce) / num_tokens);
    auto term = lambda_over_d * ce / num_tokens;
    main = mtp_loss_auto_scale(main, term, static_cast<double>(s_mtp));
  }
  auto ce = head_cross_entropy(linear_no_bias(main, head_weight), mb.labels, cfg);
  const at::Tensor masked = ce * mb.loss_mask;
  auto loss_sum = masked.sum();
  if (per_token) {
    // pretrain_gpt.py loss_func: the masked sum; finalize_model_grads divides by N_0.
    out.lm = sequence_sum(masked) / std::max(mb.token_counts[0], 1.0);
    out.objective = loss_sum;
    return out;
  }
  auto num_tokens = count(mb.loss_mask, 0);
  out.lm = (cp != nullptr ? sequence_sum(masked) : loss_sum) / num_tokens;
  out.objective = loss_sum / num_tokens / static_cast<double>(num_microbatches);
  if (cp != nullptr) out.objective = out.objective * cp_size;  // schedules.py: *= cp_group_size
  return out;
}

}  // namespace mtp::model
