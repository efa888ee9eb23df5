#include "harness/model/layers.h"

#include <cmath>

#include "harness/common/error.h"
#include "harness/model/linear.h"
#include "kernels/ops.h"

namespace mtp::model {

bool is_reduced_precision(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
}

at::Tensor loss_precision(const at::Tensor& t) {
  return is_reduced_precision(t) ? t.to(at::kFloat) : t;
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (is_reduced_precision(x)) {
    auto xf = x.to(at::kFloat);
    auto normed = xf * at::rsqrt((xf * xf).mean(-1, /*keepdim=*/true) + eps);
    return normed.to(x.scalar_type()) * weight;
  }
  auto variance = (x * x).mean(-1, /*keepdim=*/true);
  return x * at::rsqrt(variance + eps) * weight;
}

at::Tensor linear_no_bias(const at::Tensor& x, const at::Tensor& weight) {
  return linear_node(x, weight);  // at::matmul(x, weight.t()) bit for bit, one autograd node
}

RopeTables rope_tables(int64_t seq_length, int64_t kv_channels, double base, at::ScalarType dtype,
                       at::Device device) {
  if (dtype == at::kBFloat16 || dtype == at::kHalf) {
    RopeTables t = rope_tables(seq_length, kv_channels, base, at::kFloat, at::Device(at::kCPU));
    return {t.cos.to(dtype).to(device), t.sin.to(dtype).to(device)};
  }
  auto opts = at::TensorOptions().dtype(dtype);
  auto exponent = at::arange(0, kv_channels, 2, opts) / static_cast<double>(kv_channels);
  auto inv_freq = 1.0 / at::pow(base, exponent);
  auto positions = at::arange(seq_length, opts);
  auto freqs = at::outer(positions, inv_freq);  // [s, hn/2]
  auto emb = at::cat({freqs, freqs}, -1);       // [s, hn]
  // Computed on the CPU (the same bits everywhere), then moved.
  return {emb.cos().to(device), emb.sin().to(device)};
}

RopeTables chunk_rope_tables(const config::ModelConfig& cfg, at::ScalarType dtype,
                             at::Device device, const ParallelGroups& groups) {
  ContextParallel* cp = groups.cp;
  RopeTables t = rope_tables(cfg.seq_length, cfg.kv_channels(), cfg.rotary_base, dtype, device);
  if (cp != nullptr && cp->size() > 1) {
    const at::Tensor rows = cp->positions(cfg.seq_length).to(device);
    t.cos = t.cos.index_select(0, rows);
    t.sin = t.sin.index_select(0, rows);
  }
  t.cp = cp;
  t.ep = groups.ep;
  return t;
}

at::Tensor apply_rope(const at::Tensor& x, const RopeTables& rope) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto rotated = at::cat({-x2, x1}, -1);
  // cos/sin [s, hn] broadcast over [s, b, heads, hn].
  auto cos = rope.cos.view({rope.cos.size(0), 1, 1, rope.cos.size(1)});
  auto sin = rope.sin.view({rope.sin.size(0), 1, 1, rope.sin.size(1)});
  return x * cos + rotated * sin;
}

LayerWeights LayerWeights::from(const ParamTable& params, const std::string& prefix,
                                const config::ModelConfig& cfg, bool is_moe,
                                const ExpertParallel* ep) {
  LayerWeights w;
  w.input_layernorm = params.get(prefix + "input_layernorm.weight");
  w.linear_qkv = params.get(prefix + "self_attention.linear_qkv.weight");
  w.linear_proj = params.get(prefix + "self_attention.linear_proj.weight");
  w.pre_mlp_layernorm = params.get(prefix + "pre_mlp_layernorm.weight");
  if (is_moe) {
    w.moe = MoeWeights::from(params, prefix, cfg, ep);
  } else {
    w.linear_fc1 = params.get(prefix + "mlp.linear_fc1.weight");
    w.linear_fc2 = params.get(prefix + "mlp.linear_fc2.weight");
  }
  return w;
}

at::Tensor self_attention(const at::Tensor& x, const LayerWeights& w,
                          const config::ModelConfig& cfg, const RopeTables& rope) {
  const int64_t s = x.size(0), b = x.size(1);
  const int64_t nh = cfg.num_attention_heads, ng = cfg.num_query_groups, hn = cfg.kv_channels();
  const int64_t q_per_group = nh / ng;
  auto qkv = linear_no_bias(x, w.linear_qkv).view({s, b, ng, (q_per_group + 2) * hn});
  auto parts = at::split_with_sizes(qkv, {q_per_group * hn, hn, hn}, -1);
  auto q = parts[0].reshape({s, b, nh, hn});
  auto k = parts[1];  // [s, b, ng, hn]
  auto v = parts[2];
  if (cfg.kernels == config::Kernels::kHarness) {
    // The fused op: bitwise the composite below (kernels/rope_math.h), 2 kernels, not ~28.
    q = kernels::rope(q, rope.cos, rope.sin);
    k = kernels::rope(k, rope.cos, rope.sin);
  } else {
    q = apply_rope(q, rope);
    k = apply_rope(k, rope);
  }
  ContextParallel* cp = rope.cp != nullptr && rope.cp->size() > 1 ? rope.cp : nullptr;
  if (cp != nullptr) {
    k = cp->all_gather_sequence(k);  // [S, b, ng, hn], global order
    v = cp->all_gather_sequence(v);
  }
  const int64_t keys = k.size(0);
  if (q_per_group > 1) {
    k = k.repeat_interleave(q_per_group, /*dim=*/2);
    v = v.repeat_interleave(q_per_group, /*dim=*/2);
  }
  // [s, b, nh, hn] → [b, nh, s, hn]
  auto qb = q.permute({1, 2, 0, 3});
  auto kb = k.permute({1, 2, 0, 3});
  auto vb = v.permute({1, 2, 0, 3});
  const double scale = 1.0 / std::sqrt(static_cast<double>(hn));
  if (cfg.attention_backend == config::AttentionBackend::kFlash) {
    MTP_INTERNAL_ASSERT(cp == nullptr, "flash attention with context parallelism");
    auto context = kernels::flash_causal_attention(qb.contiguous(), kb.contiguous(),
                                                   vb.contiguous(), scale);  // [b, nh, s, hn]
    context = context.permute({2, 0, 1, 3}).reshape({s, b, nh * hn});
    return linear_no_bias(context, w.linear_proj);
  }
  if (cfg.attention_backend == config::AttentionBackend::kHarness) {
    MTP_INTERNAL_ASSERT(cp == nullptr, "harness attention with context parallelism");
    auto context = kernels::causal_attention(qb, kb, vb, scale);  // [b, nh, s, hn]
    context = context.permute({2, 0, 1, 3}).reshape({s, b, nh * hn});
    return linear_no_bias(context, w.linear_proj);
  }
  // bf16: scale, mask and softmax in fp32, probabilities cast back (Megatron
  // FusedScaleMaskSoftmax with attention_softmax_in_fp32).
  auto scores = loss_precision(at::matmul(qb, kb.transpose(-2, -1))) * scale;
  at::Tensor future;
  if (cp == nullptr) {
    future = at::ones({s, s}, at::TensorOptions().dtype(at::kBool).device(x.device())).triu(1);
  } else {
    // Query at global position p (this rank's) against key j (global order): future when j > p.
    const at::Tensor query_pos = cp->positions(keys).to(x.device()).unsqueeze(1);  // [s, 1]
    future = at::arange(keys, at::TensorOptions().dtype(at::kLong).device(x.device()))
                 .unsqueeze(0)
                 .gt(query_pos);  // [s, S]
  }
  scores = scores.masked_fill(future, -10000.0);
  auto probs = at::softmax(scores, -1).to(qb.scalar_type());
  auto context = at::matmul(probs, vb);                              // [b, nh, s, hn]
  context = context.permute({2, 0, 1, 3}).reshape({s, b, nh * hn});  // head-major
  return linear_no_bias(context, w.linear_proj);
}

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& fc1, const at::Tensor& fc2,
                  config::Kernels kernels) {
  auto gate_up = linear_no_bias(x, fc1);
  if (kernels == config::Kernels::kHarness) {
    return linear_no_bias(kernels::swiglu(gate_up), fc2);  // bitwise the composite below
  }
  auto halves = gate_up.chunk(2, -1);
  return linear_no_bias(at::silu(halves[0]) * halves[1], fc2);
}

at::Tensor swiglu_mlp(const at::Tensor& x, const LayerWeights& w, const config::ModelConfig& cfg) {
  return swiglu(x, w.linear_fc1, w.linear_fc2, cfg.kernels);
}

at::Tensor transformer_layer(const at::Tensor& x, const LayerWeights& w,
                             const config::ModelConfig& cfg, const RopeTables& rope) {
  auto h = x + self_attention(norm(x, w.input_layernorm, cfg), w, cfg, rope);
  if (w.moe) return h + moe_mlp(norm(h, w.pre_mlp_layernorm, cfg), *w.moe, cfg);
  return h + swiglu_mlp(norm(h, w.pre_mlp_layernorm, cfg), w, cfg);
}

at::Tensor norm(const at::Tensor& x, const at::Tensor& weight, const config::ModelConfig& cfg) {
  if (cfg.kernels == config::Kernels::kHarness)
    return kernels::rms_norm(x, weight, cfg.norm_epsilon);
  return rms_norm(x, weight, cfg.norm_epsilon);
}

at::Tensor embed(const at::Tensor& ids, const at::Tensor& table, const config::ModelConfig& cfg) {
  if (cfg.kernels == config::Kernels::kHarness) return kernels::embedding_lookup(ids, table);
  return embedding_lookup(ids, table);
}

at::Tensor embedding_lookup(const at::Tensor& ids, const at::Tensor& table) {
  const int64_t b = ids.size(0), s = ids.size(1);
  auto rows = at::index_select(table, 0, ids.reshape({-1}));
  return rows.view({b, s, table.size(1)}).transpose(0, 1).contiguous();
}

}  // namespace mtp::model

namespace mtp::model {

at::Tensor decoder_layers_forward(const at::Tensor& x, const std::vector<int>& layer_ids,
                                  const ParamTable& params, const config::ModelConfig& cfg,
                                  const RopeTables& rope) {
  at::Tensor h = x;
  for (int i : layer_ids) {
    const std::string prefix = "decoder.layers." + std::to_string(i) + ".";
    h = transformer_layer(h, LayerWeights::from(params, prefix, cfg, cfg.is_moe_layer(i)), cfg,
                          rope);
  }
  return h;
}

}  // namespace mtp::model
