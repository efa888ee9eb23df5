#include "harness/engine/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "harness/common/error.h"
#include "harness/data/microbatch.h"
#include "harness/engine/determinism.h"
#include "harness/engine/executor.h"
#include "harness/record/record.h"
#include "harness/transport/transport.h"

#ifndef MTP_GIT_REVISION
#define MTP_GIT_REVISION "unknown"
#endif

namespace mtp::engine {
namespace {

/// One parameter of the model and its copies on the stages that hold it, ascending stage index.
struct SharedParam {
  std::string name;
  std::vector<int> stages;
  std::vector<at::Tensor> copies;
  at::Tensor main_grad;
  at::Tensor exp_avg, exp_avg_sq;  // Adam state (one per parameter, not per copy)
};

record::TensorData to_record(const std::string& name, const at::Tensor& t) {
  auto c = t.detach().contiguous().cpu();
  record::TensorData d;
  d.name = name;
  d.shape = c.sizes().vec();
  switch (c.scalar_type()) {
    case at::kFloat: d.dtype = record::DType::kF32; break;
    case at::kDouble: d.dtype = record::DType::kF64; break;
    case at::kInt: d.dtype = record::DType::kI32; break;
    case at::kByte: d.dtype = record::DType::kU8; break;
    case at::kLong: d.dtype = record::DType::kI64; break;
    default: throw InternalError(fmt::format("cannot record dtype of {}", name));
  }
  d.bytes.resize(c.nbytes());
  if (c.nbytes() > 0) std::memcpy(d.bytes.data(), c.data_ptr(), c.nbytes());
  return d;
}

at::ScalarType parse_dtype(const std::string& s) {
  if (s == "float32") return at::kFloat;
  if (s == "float64") return at::kDouble;
  throw InputError(fmt::format("training: dtype '{}' is not supported (accepted: \"float32\", "
                               "\"float64\")", s));
}

std::vector<SharedParam> collect_params(const std::vector<std::unique_ptr<ModelChunk>>& chunks,
                                        const InitialWeights& init,
                                        const std::vector<int>& embedding_group) {
  std::vector<SharedParam> params;
  std::map<std::string, size_t> index;
  for (const auto& spec : init.specs) {
    index[spec.name] = params.size();
    params.push_back({spec.name, {}, {}, {}, {}, {}});
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    for (const auto& [name, t] : chunks[i]->params().entries()) {
      auto it = index.find(name);
      MTP_INTERNAL_ASSERT(it != index.end(), fmt::format("stage {} holds unknown parameter {}", i, name));
      params[it->second].stages.push_back(static_cast<int>(i));
      params[it->second].copies.push_back(t);
    }
  }
  for (const auto& p : params) {
    MTP_INTERNAL_ASSERT(!p.copies.empty(), fmt::format("no stage holds parameter {}", p.name));
    if (p.name == model::kWordEmbeddingName) {
      MTP_INTERNAL_ASSERT(p.stages == embedding_group,
                          fmt::format("embedding copies on stages [{}] differ from the embedding "
                                      "group [{}]", fmt::join(p.stages, ","),
                                      fmt::join(embedding_group, ",")));
    } else {
      MTP_INTERNAL_ASSERT(p.copies.size() == 1, fmt::format("{} has {} copies", p.name, p.copies.size()));
    }
  }
  return params;
}

}  // namespace

layout::PipelineLayout variant_layout(const VariantSpec& v, const model::ModelConfig& model) {
  const int N = static_cast<int>(model.num_layers), D = static_cast<int>(model.mtp_num_layers);
  if (v.layout.empty()) return layout::default_layout(v.pipeline_size, v.virtual_size, N, D);
  return layout::build_layout(v.layout, v.pipeline_size, N, D);
}

schedule::ScheduleConfig variant_schedule(const VariantSpec& v, const layout::PipelineLayout& l,
                                          int64_t num_microbatches) {
  schedule::ScheduleConfig s;
  if (v.schedule.empty()) {
    s.kind = l.pipeline_size == 1 ? schedule::ScheduleKind::kNoPipelining
             : l.virtual_size == 1 ? schedule::ScheduleKind::kOneFOneB
                                   : schedule::ScheduleKind::kInterleaved;
  } else {
    s.kind = schedule::parse_schedule_kind(v.schedule);
  }
  s.pipeline_size = l.pipeline_size;
  s.virtual_size = l.virtual_size;
  s.num_microbatches = static_cast<int>(num_microbatches);
  s.microbatch_group_size = v.microbatch_group_size;
  schedule::validate(s);
  if (v.overlap_p2p && s.kind != schedule::ScheduleKind::kInterleaved &&
      s.kind != schedule::ScheduleKind::kCombined1F1B) {
    throw InputError(fmt::format("variant \"{}\": overlap_p2p needs the interleaved or combined_1f1b "
                                 "schedule (Megatron overlap_p2p_comm), not {}", v.name,
                                 schedule::schedule_kind_name(s.kind)));
  }
  return s;
}

RunResult run_variant(const model::ModelConfig& model_in, const TrainingConfig& training,
                      const data::DataConfig& data_cfg, const VariantSpec& variant,
                      const Implementation& impl, const RunOptions& options) {
  apply_determinism();
  const auto t0 = std::chrono::steady_clock::now();
  model::ModelConfig cfg = model_in;
  if (variant.mtp_loss_scaling_factor) cfg.mtp_loss_scaling_factor = *variant.mtp_loss_scaling_factor;
  cfg.validate();
  const double clip = variant.clip_grad.value_or(training.clip_grad);
  const at::ScalarType dtype = parse_dtype(training.dtype);
  const int64_t M = training.num_microbatches;
  if (M < 1) throw InputError(fmt::format("training: num_microbatches = {} must be >= 1", M));
  if (training.steps < 1) throw InputError(fmt::format("training: steps = {} must be >= 1", training.steps));

  layout::PipelineLayout layout = variant_layout(variant, cfg);
  impl.check_layout(layout);
  schedule::ScheduleConfig sched = variant_schedule(variant, layout, M);
  if (sched.kind == schedule::ScheduleKind::kCombined1F1B && cfg.mtp_num_layers > 1) {
    throw InputError(fmt::format(
        "variant \"{}\": combined_1f1b supports mtp_num_layers <= 1 (Megatron "
        "transformer_config.py precondition), the model has {}", variant.name, cfg.mtp_num_layers));
  }

  auto source = data::open_token_source(data_cfg);
  data::MicrobatchBuilder builder(*source, cfg.micro_batch_size, cfg.seq_length, cfg.vocab_size,
                                  data_cfg.mask_token);

  InitialWeights init = make_initial_weights(cfg, training.seed);
  auto chunks = impl.build_chunks(layout, cfg, init, dtype);
  MTP_INTERNAL_ASSERT(static_cast<int>(chunks.size()) == layout.num_stages(), "one chunk per stage");
  auto params = collect_params(chunks, init, impl.embedding_group(layout, cfg));

  transport::InProcessOptions topt;
  topt.timeout = options.recv_timeout;
  topt.max_delay_us = variant.transport_max_delay_us;
  topt.delay_seed = options.delay_seed;
  auto transport = transport::make_in_process_transport(layout.pipeline_size, topt);

  RunResult result;
  result.record_path = options.record_path;
  for (const auto& c : chunks) {
    const auto& p = c->plan();
    result.chunk_map.push_back(fmt::format("stage {} (pp {}, vpp {}): {}", p.stage_index,
                                           p.pipeline_rank, p.virtual_stage, c->describe()));
  }

  record::RecordWriter rec(options.record_path);
  // Hyperparameters under Megatron's argument names.
  rec.set_attr("num_layers", cfg.num_layers);
  rec.set_attr("hidden_size", cfg.hidden_size);
  rec.set_attr("ffn_hidden_size", cfg.ffn_hidden_size);
  rec.set_attr("num_attention_heads", cfg.num_attention_heads);
  rec.set_attr("num_query_groups", cfg.num_query_groups);
  rec.set_attr("kv_channels", cfg.kv_channels());
  rec.set_attr("vocab_size", cfg.vocab_size);
  rec.set_attr("seq_length", cfg.seq_length);
  rec.set_attr("micro_batch_size", cfg.micro_batch_size);
  rec.set_attr("mtp_num_layers", cfg.mtp_num_layers);
  rec.set_attr("mtp_loss_scaling_factor", cfg.mtp_loss_scaling_factor);
  rec.set_attr("rotary_base", cfg.rotary_base);
  rec.set_attr("norm_epsilon", cfg.norm_epsilon);
  rec.set_attr("untie_embeddings_and_output_weights", int64_t{cfg.untie_embeddings ? 1 : 0});
  rec.set_attr("lr", training.lr);
  rec.set_attr("adam_beta1", training.adam_beta1);
  rec.set_attr("adam_beta2", training.adam_beta2);
  rec.set_attr("adam_eps", training.adam_eps);
  rec.set_attr("weight_decay", training.weight_decay);
  rec.set_attr("clip_grad", clip);
  // The variant.
  rec.set_attr("scenario", options.scenario_name);
  rec.set_attr("variant", variant.name);
  rec.set_attr("implementation", impl.name());
  rec.set_attr("layout", layout.text);
  rec.set_attr("P", int64_t{layout.pipeline_size});
  rec.set_attr("V", int64_t{layout.virtual_size});
  rec.set_attr("M", M);
  rec.set_attr("N", int64_t{sched.kind == schedule::ScheduleKind::kInterleaved
                                ? (sched.microbatch_group_size ? sched.microbatch_group_size
                                                               : sched.pipeline_size)
                                : 0});
  rec.set_attr("schedule", schedule::schedule_kind_name(sched.kind));
  rec.set_attr("mtp_standalone", int64_t{layout.mtp_standalone ? 1 : 0});
  rec.set_attr("overlap_p2p_comm", int64_t{variant.overlap_p2p ? 1 : 0});
  rec.set_attr("num_moe_experts", cfg.num_moe_experts);
  if (cfg.num_moe_experts > 0) {
    rec.set_attr("moe_router_topk", cfg.moe_router_topk);
    rec.set_attr("moe_ffn_hidden_size", cfg.moe_ffn_hidden_size);
    rec.set_attr("moe_shared_expert_intermediate_size", cfg.moe_shared_expert_intermediate_size);
    rec.set_attr("moe_layer_freq", fmt::format("[{}]", fmt::join(cfg.moe_layer_freq, ",")));
    rec.set_attr("moe_router_score_function", std::string("sigmoid"));
    rec.set_attr("moe_router_enable_expert_bias", int64_t{cfg.moe_router_enable_expert_bias});
    rec.set_attr("moe_router_expert_bias",
                 fmt::format("[{}]", fmt::join(cfg.moe_router_expert_bias, ",")));
    rec.set_attr("moe_router_topk_scaling_factor", cfg.moe_router_topk_scaling_factor);
  }
  rec.set_attr("seed", static_cast<int64_t>(training.seed));
  rec.set_attr("dtype", training.dtype);
  rec.set_attr("device", std::string("cpu"));
  rec.set_attr("execution", fmt::format("{} rank thread(s), in-process transport", layout.pipeline_size));
  rec.set_attr("data_source", source->describe());
  rec.set_attr("data_sha256", source->sha256());
  rec.set_attr("git_revision", std::string(MTP_GIT_REVISION));
  rec.set_attr("chunk_map", fmt::format("{}", fmt::join(result.chunk_map, "\n")));
  for (const auto& [k, v] : determinism_fingerprint()) rec.set_attr(k, v);

  for (auto& p : params) rec.write(0, "weight", to_record(p.name, p.copies[0]));

  for (int64_t step = 1; step <= training.steps; ++step) {
    // Microbatches: identical for every variant.
    std::vector<MicrobatchTensors> mbs;
    const int64_t b = cfg.micro_batch_size, s = cfg.seq_length;
    auto tokens_all = at::empty({M, b, s}, at::kInt);
    auto labels_all = at::empty({M, b, s}, at::kInt);
    auto mask_all = at::empty({M, b, s}, at::kByte);
    for (int64_t mb = 0; mb < M; ++mb) {
      data::Microbatch m = builder.build(step, mb, M);
      std::memcpy(tokens_all[mb].data_ptr(), m.tokens.data(), m.tokens.size() * sizeof(int32_t));
      std::memcpy(labels_all[mb].data_ptr(), m.labels.data(), m.labels.size() * sizeof(int32_t));
      std::memcpy(mask_all[mb].data_ptr(), m.loss_mask.data(), m.loss_mask.size());
      mbs.push_back({tokens_all[mb].to(at::kLong), labels_all[mb].to(at::kLong),
                     mask_all[mb].to(dtype), M});
    }
    rec.write(step, "batch", to_record("tokens", tokens_all));
    rec.write(step, "batch", to_record("labels", labels_all));
    rec.write(step, "batch", to_record("loss_mask", mask_all));

    for (auto& p : params) {
      for (auto& c : p.copies) c.mutable_grad().reset();
    }
    ExecutionOptions exec;
    exec.overlap_p2p = variant.overlap_p2p;
    StepLosses losses = run_pipeline_step(chunks, layout, sched, mbs, *transport, exec);

    // Losses: per-microbatch values averaged in microbatch order (float64).
    double lm = 0.0;
    for (double v : losses.lm) lm += v;
    lm /= static_cast<double>(M);
    std::vector<double> mtp(cfg.mtp_num_layers, 0.0);
    for (int64_t k = 0; k < cfg.mtp_num_layers; ++k) {
      for (int64_t mb = 0; mb < M; ++mb) mtp[k] += losses.mtp[mb][k];
      mtp[k] /= static_cast<double>(M);
    }
    double total = lm, mtp_sum = 0.0;
    for (double v : mtp) mtp_sum += v;
    if (cfg.mtp_num_layers > 0) {
      total += cfg.mtp_loss_scaling_factor / static_cast<double>(cfg.mtp_num_layers) * mtp_sum;
    }
    result.total_loss.push_back(total);
    auto scalar = [](double v) { return at::scalar_tensor(v, at::kDouble); };
    rec.write(step, "loss", to_record("lm", scalar(lm)));
    for (int64_t k = 0; k < cfg.mtp_num_layers; ++k) {
      rec.write(step, "loss", to_record(fmt::format("mtp_{}", k + 1), scalar(mtp[k])));
    }
    rec.write(step, "loss", to_record("total", scalar(total)));

    // Finalize: sum each shared parameter's per-copy main grads in ascending stage order
    // (Megatron's embedding-group all-reduce, in a fixed order).
    at::NoGradGuard no_grad;
    for (auto& p : params) {
      at::Tensor g;
      for (auto& c : p.copies) {
        if (!c.grad().defined()) continue;
        g = g.defined() ? g + c.grad() : c.grad().clone();
      }
      p.main_grad = g.defined() ? g : at::zeros_like(p.copies[0]);
      rec.write(step, "grad", to_record(p.name, p.main_grad));
    }

    // Optional clipping with the global norm summed in canonical parameter order.
    if (clip > 0.0) {
      double sumsq = 0.0;
      for (auto& p : params) {
        auto g = p.main_grad.to(at::kDouble);
        sumsq += (g * g).sum().item<double>();
      }
      const double norm = std::sqrt(sumsq);
      const double coeff = clip / (norm + 1e-6);
      rec.set_step_attr(step, "grad_norm", norm);
      rec.set_step_attr(step, "clip_coeff", std::min(coeff, 1.0));
      if (coeff < 1.0) {
        for (auto& p : params) p.main_grad.mul_(coeff);
      }
    }

    // Adam (decoupled weight decay), one state per parameter; every copy gets the same value.
    const double bc1 = 1.0 - std::pow(training.adam_beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(training.adam_beta2, static_cast<double>(step));
    for (auto& p : params) {
      at::Tensor w = p.copies[0];
      if (!p.exp_avg.defined()) {
        p.exp_avg = at::zeros_like(w);
        p.exp_avg_sq = at::zeros_like(w);
      }
      const at::Tensor& g = p.main_grad;
      p.exp_avg.mul_(training.adam_beta1).add_(g, 1.0 - training.adam_beta1);
      p.exp_avg_sq.mul_(training.adam_beta2).addcmul_(g, g, 1.0 - training.adam_beta2);
      auto update = (p.exp_avg / bc1) / ((p.exp_avg_sq / bc2).sqrt() + training.adam_eps);
      if (training.weight_decay != 0.0) update = update + training.weight_decay * w;
      w.sub_(training.lr * update);
      for (size_t i = 1; i < p.copies.size(); ++i) {
        // Megatron keeps the copies equal by summing their grads over the embedding group and
        // applying one update; here the update is applied once and copied.
        p.copies[i].copy_(w);
        MTP_INTERNAL_ASSERT(at::equal(p.copies[i], w),
                            fmt::format("copy of {} on stage {} drifted", p.name, p.stages[i]));
      }
      rec.write(step, "weight", to_record(p.name, w));
    }
  }
  rec.commit();
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace mtp::engine
