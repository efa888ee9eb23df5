#include "harness/oracle/oracle.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/common/error.h"
#include "harness/config/param_specs.h"

namespace mtp::oracle {
namespace {

using at::Tensor;

/// The step's parameters as float64 leaves that collect their gradient.
class Params {
 public:
  Params(const config::ModelConfig& cfg, const std::map<std::string, Tensor>& given) {
    for (const auto& spec : config::parameter_specs(cfg)) {
      const auto it = given.find(spec.name);
      MTP_CHECK(it != given.end(), fmt::format("oracle: parameter {} is missing", spec.name));
      MTP_CHECK(it->second.sizes().vec() == spec.shape,
                fmt::format("oracle: parameter {} has shape {}, the model needs [{}]", spec.name,
                            c10::str(it->second.sizes()), fmt::join(spec.shape, ", ")));
      leaves_[spec.name] =
          it->second.detach().to(at::kCPU).to(at::kDouble).clone().requires_grad_(true);
    }
  }
  const Tensor& operator()(const std::string& name) const { return leaves_.at(name); }
  const std::map<std::string, Tensor>& all() const { return leaves_; }

 private:
  std::map<std::string, Tensor> leaves_;
};

/// x Wᵀ (Megatron's ColumnParallelLinear / RowParallelLinear without bias).
Tensor project(const Tensor& x, const Tensor& w) { return at::matmul(x, w.t()); }

/// RMSNorm (Megatron's RMSNorm): x / √(mean(x²) + ε) · g over the last dimension.
Tensor rms_norm(const Tensor& x, const Tensor& g, double eps) {
  return x / at::sqrt((x * x).mean(-1, true) + eps) * g;
}

/// silu(gate) · up, then the down projection (SwiGLU).
Tensor swiglu(const Tensor& x, const Tensor& fc1, const Tensor& fc2) {
  const Tensor a = project(x, fc1);
  const int64_t f = a.size(-1) / 2;
  const Tensor gate = a.narrow(-1, 0, f), up = a.narrow(-1, f, f);
  return project(gate * at::sigmoid(gate) * up, fc2);
}

/// Shift left by one along the sequence, the vacated last position 0 (Megatron roll_tensor with
/// the tail zeroed).
Tensor roll_left(const Tensor& t) {
  const int64_t s = t.size(-1);
  return at::cat({t.narrow(-1, 1, s - 1), at::zeros_like(t.narrow(-1, 0, 1))}, -1);
}

/// Rotate-half RoPE of x [s, b, n, hn]: position p, pair i (i < hn/2) turns by p · base^(−2i/hn).
Tensor rope(const Tensor& x, double base) {
  const int64_t s = x.size(0), hn = x.size(3), half = hn / 2;
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const Tensor i = at::arange(half, f64);
  const Tensor inv_freq = at::exp(-(2.0 * i / static_cast<double>(hn)) * std::log(base));
  const Tensor angle = at::arange(s, f64).unsqueeze(1) * inv_freq.unsqueeze(0);  // [s, half]
  const Tensor cos = at::cat({angle.cos(), angle.cos()}, -1).view({s, 1, 1, hn});
  const Tensor sin = at::cat({angle.sin(), angle.sin()}, -1).view({s, 1, 1, hn});
  const Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

class Step {
 public:
  Step(const config::ModelConfig& cfg, const Params& p) : c_(cfg), p_(p) {}

  /// The word embedding of ids [b, s]: [s, b, h].
  Tensor embed(const Tensor& ids) const {
    const Tensor& table = p_(config::kWordEmbeddingName);
    return table.index_select(0, ids.reshape({-1}))
        .view({ids.size(0), ids.size(1), table.size(1)})
        .transpose(0, 1);
  }

  /// Causal grouped-query self-attention of x [s, b, h] with the weights under `prefix`.
  Tensor attention(const Tensor& x, const std::string& prefix) const {
    const int64_t s = x.size(0), b = x.size(1);
    const int64_t nh = c_.num_attention_heads, ng = c_.num_query_groups;
    const int64_t hn = c_.hidden_size / nh, per_group = nh / ng;
    const Tensor qkv = project(x, p_(prefix + "self_attention.linear_qkv.weight"))
                           .view({s, b, ng, (per_group + 2) * hn});
    const Tensor q =
        rope(qkv.narrow(-1, 0, per_group * hn).reshape({s, b, nh, hn}), c_.rotary_base);
    std::vector<int64_t> group_of_head;  // query head j reads key/value group j / (nh/ng)
    for (int64_t j = 0; j < nh; ++j) group_of_head.push_back(j / per_group);
    const Tensor head_group = at::tensor(group_of_head, at::TensorOptions().dtype(at::kLong));
    const Tensor k = rope(qkv.narrow(-1, per_group * hn, hn), c_.rotary_base)
                         .index_select(2, head_group);  // [s, b, nh, hn]
    const Tensor v = qkv.narrow(-1, (per_group + 1) * hn, hn).index_select(2, head_group);
    Tensor scores = at::einsum("qbnd,kbnd->bnqk", {q, k}) / std::sqrt(static_cast<double>(hn));
    const Tensor future =
        at::ones({s, s}, at::TensorOptions().dtype(at::kBool)).triu(1);  // key after query
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
    const Tensor context = at::einsum("bnqk,kbnd->qbnd", {at::softmax(scores, -1), v});
    return project(context.reshape({s, b, nh * hn}),
                   p_(prefix + "self_attention.linear_proj.weight"));
  }

  /// The MoE MLP of x [s, b, h]: every expert applied to every token, weighted by the gate it
  /// has for the token (0 where not selected), plus the shared expert.
  Tensor moe(const Tensor& x, const std::string& prefix) const {
    const int64_t E = c_.num_moe_experts, k = c_.moe_router_topk, h = x.size(-1);
    const Tensor tokens = x.reshape({-1, h});  // [T, h]
    const Tensor scores = at::sigmoid(project(tokens, p_(prefix + "mlp.router.weight")));
    Tensor selection = scores.detach();
    if (c_.moe_router_enable_expert_bias && !c_.moe_router_expert_bias.empty()) {
      selection =
          selection + at::tensor(c_.moe_router_expert_bias, at::TensorOptions().dtype(at::kDouble));
    }
    const Tensor top = std::get<1>(at::sort(selection, /*stable=*/true, -1, /*descending=*/true))
                           .narrow(-1, 0, k);  // [T, k]
    Tensor gates = scores.gather(1, top);
    if (k > 1) gates = gates / gates.sum(-1, true);
    gates = gates * c_.moe_router_topk_scaling_factor;
    // weight[t, e] = the gate of expert e for token t (0 when e is not among its top k).
    const Tensor weight = at::zeros({tokens.size(0), E}, gates.options()).scatter(1, top, gates);
    Tensor out = at::zeros_like(tokens);
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = fmt::format("{}mlp.experts.local_experts.{}.", prefix, e);
      out = out + weight.narrow(1, e, 1) *
                      swiglu(tokens, p_(p + "linear_fc1.weight"), p_(p + "linear_fc2.weight"));
    }
    if (c_.moe_shared_expert_intermediate_size > 0) {
      const std::string p = prefix + "mlp.shared_experts.";
      out = out + swiglu(tokens, p_(p + "linear_fc1.weight"), p_(p + "linear_fc2.weight"));
    }
    return out.view(x.sizes());
  }

  /// One pre-norm transformer layer with the weights under `prefix`.
  Tensor layer(const Tensor& x, const std::string& prefix, bool is_moe) const {
    const double eps = c_.norm_epsilon;
    const Tensor h = x + attention(rms_norm(x, p_(prefix + "input_layernorm.weight"), eps), prefix);
    const Tensor y = rms_norm(h, p_(prefix + "pre_mlp_layernorm.weight"), eps);
    if (is_moe) return h + moe(y, prefix);
    return h +
           swiglu(y, p_(prefix + "mlp.linear_fc1.weight"), p_(prefix + "mlp.linear_fc2.weight"));
  }

  /// Σ mask·ce of hidden [s, b, h] against labels, mask [b, s].
  Tensor masked_sum_ce(const Tensor& hidden, const Tensor& labels, const Tensor& mask) const {
    const Tensor& head =
        p_(c_.untie_embeddings ? config::kOutputLayerName : config::kWordEmbeddingName);
    const Tensor logits = project(hidden, head).transpose(0, 1);  // [b, s, V]
    const Tensor ce =
        at::logsumexp(logits, -1) - logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1);
    return (ce * mask).sum();
  }

  /// One microbatch: the masked cross-entropy sums of the LM head and of each depth (scalars
  /// with graphs), and the token counts of their masks (N_0, N_1 .. N_D, no graph).
  struct Sums {
    std::vector<Tensor> sums;
    std::vector<double> counts;
  };
  Sums microbatch(const Tensor& ids, const Tensor& labels, const Tensor& mask) const {
    Tensor h = embed(ids);
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      h = layer(h, fmt::format("decoder.layers.{}.", i), c_.is_moe_layer(i));
    }
    h = rms_norm(h, p_(config::kFinalLayernormName), c_.norm_epsilon);
    Sums out;
    out.sums.push_back(masked_sum_ce(h, labels, mask));
    out.counts.push_back(mask.sum().item<double>());
    Tensor depth_ids = ids, depth_labels = labels, depth_mask = mask;
    for (int64_t k = 0; k < c_.mtp_num_layers; ++k) {
      const config::MtpLayerNames n = config::mtp_layer_names(k);
      depth_ids = roll_left(depth_ids);
      depth_labels = roll_left(depth_labels);
      depth_mask = roll_left(depth_mask);
      const Tensor z = at::cat({rms_norm(embed(depth_ids), p_(n.enorm), c_.norm_epsilon),
                                rms_norm(h, p_(n.hnorm), c_.norm_epsilon)},
                               -1);
      h = layer(project(z, p_(n.eh_proj)), n.transformer_layer, c_.mtp_layer_is_moe());
      h = rms_norm(h, p_(n.final_layernorm), c_.norm_epsilon);
      out.sums.push_back(masked_sum_ce(h, depth_labels, depth_mask));
      out.counts.push_back(depth_mask.sum().item<double>());
    }
    return out;
  }

 private:
  const config::ModelConfig& c_;
  const Params& p_;
};

}  // namespace

StepResult straight_line_step(const StepInputs& in) {
  const config::ModelConfig& c = in.model;
  c.validate();
  for (const Tensor* t : {&in.tokens, &in.labels, &in.loss_mask}) {
    MTP_CHECK(t->dim() == 3 && t->size(1) == c.micro_batch_size && t->size(2) == c.seq_length &&
                  t->size(0) == in.tokens.size(0),
              fmt::format("oracle: the batch must be [K, {}, {}] three times (got {})",
                          c.micro_batch_size, c.seq_length, c10::str(t->sizes())));
  }
  c10::AutoGradMode grad_on(true);
  const Params params(c, in.weights);
  const Step step(c, params);
  const int64_t K = in.tokens.size(0), D = c.mtp_num_layers;
  StepResult r;
  r.mtp.assign(static_cast<size_t>(D), 0.0);
  // calculate_per_token_loss: every loss is the global batch's token mean, Σ sums / max(N, 1)
  // with N over all K microbatches (the normalisation Megatron-LM #7452 asks for); otherwise
  // each microbatch's mean, averaged over the K microbatches. Both are J = lm + λ/D Σ mtp_k.
  std::vector<double> global(static_cast<size_t>(1 + D), 0.0);
  if (c.calculate_per_token_loss) {
    for (int64_t mb = 0; mb < K; ++mb) {
      Tensor m = in.loss_mask[mb].to(at::kDouble);
      for (int64_t k = 0; k <= D; ++k) {
        global[static_cast<size_t>(k)] += m.sum().item<double>();
        m = roll_left(m);
      }
    }
  }
  // The float32 rounding of the MTP auto-scaler's scale (StepInputs::num_microbatches).
  double mtp_scale_rounding = 1.0;
  if (!c.calculate_per_token_loss && in.num_microbatches > 0) {
    const float scale = 1.0f / static_cast<float>(in.num_microbatches) *
                        static_cast<float>(in.context_parallel_size);
    mtp_scale_rounding = static_cast<double>(scale) * static_cast<double>(in.num_microbatches) /
                         static_cast<double>(in.context_parallel_size);
  }
  for (int64_t mb = 0; mb < K; ++mb) {
    const Step::Sums s = step.microbatch(in.tokens[mb].to(at::kLong), in.labels[mb].to(at::kLong),
                                         in.loss_mask[mb].to(at::kDouble));
    std::vector<Tensor> losses;
    for (int64_t k = 0; k <= D; ++k) {
      const auto i = static_cast<size_t>(k);
      losses.push_back(c.calculate_per_token_loss
                           ? s.sums[i] / std::max(global[i], 1.0)
                           : s.sums[i] / std::max(s.counts[i], 1.0) / static_cast<double>(K));
    }
    Tensor objective = losses[0];
    for (int64_t k = 1; k <= D; ++k) {
      objective =
          objective +
          (c.mtp_loss_scaling_factor / static_cast<double>(D) * mtp_scale_rounding) * losses[k];
    }
    objective.backward();
    r.lm += losses[0].item<double>();
    for (int64_t k = 1; k <= D; ++k) r.mtp[static_cast<size_t>(k - 1)] += losses[k].item<double>();
  }
  r.total = r.lm;
  for (double m : r.mtp) r.total += c.mtp_loss_scaling_factor / static_cast<double>(D) * m;
  // Per-token loss: Megatron multiplies the summed grads by 1.0 / num_tokens computed as a
  // float32 tensor (finalize_model_grads.py), i.e. ∂J/∂w times N_0 · fl32(1/N_0).
  double grad_factor = 1.0;
  if (c.calculate_per_token_loss) {
    const double n0 = std::max(global[0], 1.0);
    grad_factor = static_cast<double>(1.0f / static_cast<float>(n0)) * n0;
  }
  for (const auto& [name, leaf] : params.all()) {
    Tensor g = leaf.grad().defined() ? leaf.grad() : at::zeros_like(leaf);
    r.grads[name] = grad_factor == 1.0 ? g : g * grad_factor;
  }
  return r;
}

double relative_l2(const at::Tensor& got, const at::Tensor& want) {
  const double norm = want.to(at::kDouble).norm().item<double>();
  const double diff = (got.to(at::kDouble) - want.to(at::kDouble)).norm().item<double>();
  if (norm > 0) return diff / norm;
  return diff == 0 ? 0.0 : INFINITY;
}

}  // namespace mtp::oracle
