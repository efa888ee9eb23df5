#include "harness/engine/trainer.h"

#include <c10/core/GradMode.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

#include "harness/common/error.h"
#include "harness/data/microbatch.h"
#include "harness/engine/determinism.h"
#include "harness/engine/executor.h"
#include "harness/gpu/gpu.h"
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

at::Device make_device(const std::string& name, int index) {
  if (name == "cpu") return at::Device(at::kCPU);
  if (name == "cuda") {
    if (!at::hasCUDA()) {
      throw InputError("device \"cuda\": this build of LibTorch has no CUDA, or no GPU is visible");
    }
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw InputError(fmt::format("device \"{}\" is not supported (accepted: \"cpu\", \"cuda\")", name));
}

void write_run_attributes(record::RecordWriter& rec, const model::ModelConfig& cfg,
                          const TrainingConfig& training, const VariantSpec& variant,
                          const Implementation& impl, const layout::PipelineLayout& layout,
                          const schedule::ScheduleConfig& sched, const data::TokenSource& source,
                          double clip, const std::string& device, int device_index,
                          const std::vector<std::string>& chunk_map, bool single_process) {
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
  rec.set_attr("kernels", cfg.kernels);
  rec.set_attr("num_moe_experts", cfg.num_moe_experts);
  if (cfg.num_moe_experts > 0) {
    rec.set_attr("moe_router_topk", cfg.moe_router_topk);
    rec.set_attr("moe_ffn_hidden_size", cfg.moe_expert_ffn_hidden_size());
    rec.set_attr("moe_shared_expert_intermediate_size", cfg.moe_shared_expert_intermediate_size);
    rec.set_attr("moe_layer_freq", fmt::format("[{}]", fmt::join(cfg.moe_layer_freq, ",")));
    rec.set_attr("moe_router_score_function", std::string("sigmoid"));
    rec.set_attr("moe_router_enable_expert_bias", int64_t{cfg.moe_router_enable_expert_bias});
    rec.set_attr("moe_router_expert_bias",
                 fmt::format("[{}]", fmt::join(cfg.moe_router_expert_bias, ",")));
    rec.set_attr("moe_router_topk_scaling_factor", cfg.moe_router_topk_scaling_factor);
  }
  rec.set_attr("lr", training.lr);
  rec.set_attr("adam_beta1", training.adam_beta1);
  rec.set_attr("adam_beta2", training.adam_beta2);
  rec.set_attr("adam_eps", training.adam_eps);
  rec.set_attr("weight_decay", training.weight_decay);
  rec.set_attr("clip_grad", clip);
  // The variant.
  rec.set_attr("variant", variant.name);
  rec.set_attr("implementation", impl.name());
  rec.set_attr("layout", layout.text);
  rec.set_attr("P", int64_t{layout.pipeline_size});
  rec.set_attr("V", int64_t{layout.virtual_size});
  rec.set_attr("M", training.num_microbatches);
  rec.set_attr("microbatch_group_size", int64_t{sched.kind == schedule::ScheduleKind::kInterleaved ||
                                    sched.kind == schedule::ScheduleKind::kCombined1F1B
                                ? (sched.microbatch_group_size ? sched.microbatch_group_size
                                                               : sched.pipeline_size)
                                : 0});
  rec.set_attr("schedule", schedule::schedule_kind_name(sched.kind));
  rec.set_attr("overlap_p2p_comm", int64_t{variant.overlap_p2p ? 1 : 0});
  rec.set_attr("mtp_standalone", int64_t{layout.mtp_standalone ? 1 : 0});
  rec.set_attr("seed", static_cast<int64_t>(training.seed));
  rec.set_attr("dtype", training.dtype);
  rec.set_attr("device", device);
  rec.set_attr("execution", single_process
                                ? fmt::format("{} rank thread(s) in one process", layout.pipeline_size)
                                : fmt::format("{} processes, one per rank", layout.pipeline_size));
  rec.set_attr("data_source", source.describe());
  rec.set_attr("data_sha256", source.sha256());
  rec.set_attr("git_revision", std::string(MTP_GIT_REVISION));
  rec.set_attr("chunk_map", fmt::format("{}", fmt::join(chunk_map, "\n")));
  for (const auto& [k, v] : determinism_fingerprint()) rec.set_attr(k, v);
  if (device == "cuda") {
    for (const auto& [k, v] : gpu::gpu_fingerprint(device_index)) rec.set_attr(k, v);
  }
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
  if (v.microbatch_group_size != 0 && s.kind != schedule::ScheduleKind::kInterleaved &&
      s.kind != schedule::ScheduleKind::kCombined1F1B) {
    throw InputError(fmt::format("variant \"{}\": microbatch_group_size applies to interleaved "
                                 "schedules, not {}", v.name, schedule::schedule_kind_name(s.kind)));
  }
  if (v.overlap_p2p && s.kind != schedule::ScheduleKind::kInterleaved &&
      s.kind != schedule::ScheduleKind::kCombined1F1B) {
    throw InputError(fmt::format("variant \"{}\": overlap_p2p needs the interleaved or combined_1f1b "
                                 "schedule (Megatron overlap_p2p_comm), not {}", v.name,
                                 schedule::schedule_kind_name(s.kind)));
  }
  return s;
}

namespace {

/// Which pipeline ranks run in this process; stage i belongs to rank i mod P.
struct Ranks {
  int P = 1;
  std::vector<bool> local;
  int owner(int stage) const { return stage % P; }
  bool is_local_stage(int stage) const { return local[owner(stage)]; }
  bool all_local() const {
    for (bool b : local) {
      if (!b) return false;
    }
    return true;
  }
  bool records() const { return local[0]; }  ///< this process writes the record
  /// The lowest local rank speaks for this process in collective messages.
  int me() const {
    for (int r = 0; r < P; ++r) {
      if (local[r]) return r;
    }
    return 0;
  }
};

enum Purpose : int { kGradToRoot = 1, kSumToOwner = 2, kGradToRecord = 3, kWeightToRecord = 4,
                     kLosses = 5, kClip = 6 };

transport::MessageTag collective(int index, int64_t step, Purpose purpose) {
  return {transport::MessageTag::Kind::kCollective, index, static_cast<int>(step * 16 + purpose)};
}

}  // namespace

RunResult run_variant(const model::ModelConfig& model_in, const TrainingConfig& training,
                      const data::DataConfig& data_cfg, const VariantSpec& variant,
                      const Implementation& impl, const RunOptions& options) {
  apply_determinism();
  const auto t0 = std::chrono::steady_clock::now();
  model::ModelConfig cfg = model_in;
  if (variant.mtp_loss_scaling_factor) cfg.mtp_loss_scaling_factor = *variant.mtp_loss_scaling_factor;
  if (variant.kernels) cfg.kernels = *variant.kernels;
  cfg.validate();
  const double clip = variant.clip_grad.value_or(training.clip_grad);
  const at::ScalarType dtype = parse_dtype(training.dtype);
  const at::Device device = make_device(training.device, options.device_index);
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
  Ranks ranks;
  ranks.P = layout.pipeline_size;
  ranks.local.assign(ranks.P, options.local_ranks.empty());
  for (int r : options.local_ranks) {
    if (r < 0 || r >= ranks.P) {
      throw InputError(fmt::format("rank {} is outside the variant's pipeline size P = {}", r, ranks.P));
    }
    ranks.local[r] = true;
  }
  if (!ranks.all_local() && options.transport == nullptr) {
    throw InputError("running a subset of the pipeline ranks needs a transport that connects them");
  }
  if (!ranks.all_local() && options.transport->world_size() != ranks.P) {
    throw InputError(fmt::format("the transport connects {} ranks but the variant has P = {}",
                                 options.transport->world_size(), ranks.P));
  }

  auto source = data::open_token_source(data_cfg);
  data::MicrobatchBuilder builder(*source, data_cfg, cfg.micro_batch_size, cfg.seq_length,
                                  cfg.vocab_size);

  InitialWeights init = make_initial_weights(cfg, training.seed);
  auto chunks = impl.build_chunks(layout, cfg, init, dtype, device);
  MTP_INTERNAL_ASSERT(static_cast<int>(chunks.size()) == layout.num_stages(), "one chunk per stage");
  auto params = collect_params(chunks, init, impl.embedding_group(layout, cfg));

  std::unique_ptr<transport::Transport> own_transport;
  transport::Transport* tr = options.transport;
  if (tr == nullptr) {
    transport::InProcessOptions topt;
    topt.timeout = options.recv_timeout;
    topt.max_delay_us = variant.transport_max_delay_us;
    topt.delay_seed = options.delay_seed;
    own_transport = transport::make_in_process_transport(layout.pipeline_size, topt);
    tr = own_transport.get();
  }
  std::vector<int> local_list;
  for (int r = 0; r < ranks.P; ++r) {
    if (ranks.local[r]) local_list.push_back(r);
  }

  RunResult result;
  result.record_path = options.record_path;
  for (const auto& c : chunks) {
    const auto& p = c->plan();
    result.chunk_map.push_back(fmt::format("stage {} (pp {}, vpp {}): {}", p.stage_index,
                                           p.pipeline_rank, p.virtual_stage, c->describe()));
  }

  std::unique_ptr<record::RecordWriter> rec;
  if (ranks.records()) {
    rec = std::make_unique<record::RecordWriter>(options.record_path);
    write_run_attributes(*rec, cfg, training, variant, impl, layout, sched, *source, clip,
                         training.device, options.device_index, result.chunk_map, ranks.all_local());
    rec->set_attr("scenario", options.scenario_name);
    for (auto& p : params) rec->write(0, "weight", to_record(p.name, init.get(p.name).to(dtype)));
  }
  const int root = 0;
  const int me = ranks.me();

  for (int64_t step = 1; step <= training.steps; ++step) {
    // Microbatches: identical for every variant and every rank.
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
      mbs.push_back({tokens_all[mb].to(at::kLong).to(device), labels_all[mb].to(at::kLong).to(device),
                     mask_all[mb].to(dtype).to(device), M});
    }
    if (rec) {
      rec->write(step, "batch", to_record("tokens", tokens_all));
      rec->write(step, "batch", to_record("labels", labels_all));
      rec->write(step, "batch", to_record("loss_mask", mask_all));
    }

    for (auto& p : params) {
      for (auto& c : p.copies) c.mutable_grad().reset();
    }
    ExecutionOptions exec;
    exec.overlap_p2p = variant.overlap_p2p;
    StepLosses losses = run_pipeline_step(chunks, layout, sched, mbs, *tr, exec, local_list);

    // Losses: the loss stage's rank sends them to the recording rank.
    const int D = static_cast<int>(cfg.mtp_num_layers);
    const int loss_rank = ranks.owner(layout.num_stages() - 1);
    if (!ranks.all_local() && loss_rank != root) {
      if (ranks.local[loss_rank]) {
        auto t = at::empty({M, 1 + D}, at::kDouble);
        for (int64_t mb = 0; mb < M; ++mb) {
          t[mb][0] = losses.lm[mb];
          for (int k = 0; k < D; ++k) t[mb][1 + k] = losses.mtp[mb][k];
        }
        tr->send(loss_rank, root, collective(0, step, kLosses), t.to(device));
      } else if (ranks.records()) {
        auto t = tr->recv(root, loss_rank, collective(0, step, kLosses), {M, 1 + D}).cpu();
        for (int64_t mb = 0; mb < M; ++mb) {
          losses.lm[mb] = t[mb][0].item<double>();
          losses.mtp[mb].assign(D, 0.0);
          for (int k = 0; k < D; ++k) losses.mtp[mb][k] = t[mb][1 + k].item<double>();
        }
      }
    }
    if (rec) {
      // Per-microbatch values averaged in microbatch order (float64).
      double lm = 0.0;
      for (double v : losses.lm) lm += v;
      lm /= static_cast<double>(M);
      std::vector<double> mtp(D, 0.0);
      for (int k = 0; k < D; ++k) {
        for (int64_t mb = 0; mb < M; ++mb) mtp[k] += losses.mtp[mb][k];
        mtp[k] /= static_cast<double>(M);
      }
      double total = lm, mtp_sum = 0.0;
      for (double v : mtp) mtp_sum += v;
      if (D > 0) total += cfg.mtp_loss_scaling_factor / static_cast<double>(D) * mtp_sum;
      result.total_loss.push_back(total);
      // Averages are taken in float64, then stored in the training dtype so that ulp:N counts
      // units of that dtype.
      auto scalar = [dtype](double v) { return at::scalar_tensor(v, at::kDouble).to(dtype); };
      rec->write(step, "loss", to_record("lm", scalar(lm)));
      for (int k = 0; k < D; ++k) rec->write(step, "loss", to_record(fmt::format("mtp_{}", k + 1), scalar(mtp[k])));
      rec->write(step, "loss", to_record("total", scalar(total)));
    }

    // Finalize: sum each shared parameter's per-copy main grads in ascending stage order
    // (Megatron's embedding-group all-reduce, in a fixed order). Copies on other processes send
    // their grads to rank 0, which sums and sends the sum back.
    c10::NoGradGuard no_grad;
    for (size_t pi = 0; pi < params.size(); ++pi) {
      auto& p = params[pi];
      const int idx = static_cast<int>(pi);
      auto grad_of = [&](size_t c) {
        const at::Tensor& g = p.copies[c].grad();
        return g.defined() ? g : at::zeros_like(p.copies[c]);
      };
      p.main_grad = at::Tensor();
      if (p.copies.size() == 1) {
        const int owner = ranks.owner(p.stages[0]);
        if (ranks.local[owner]) p.main_grad = grad_of(0).clone();
        if (!ranks.all_local() && owner != root) {
          if (ranks.local[owner]) tr->send(owner, root, collective(idx, step, kGradToRecord), p.main_grad);
          else if (ranks.records()) p.main_grad = tr->recv(root, owner, collective(idx, step, kGradToRecord), p.copies[0].sizes().vec());
        }
      } else {
        MTP_INTERNAL_ASSERT(p.stages[0] == 0, fmt::format("{}: shared copies must include stage 0", p.name));
        std::set<int> remote_owners;
        for (size_t c = 0; c < p.copies.size(); ++c) {
          const int owner = ranks.owner(p.stages[c]);
          if (ranks.local[root]) {
            at::Tensor g = ranks.local[owner]
                               ? grad_of(c)
                               : tr->recv(root, owner, collective(idx * 64 + static_cast<int>(c), step, kGradToRoot),
                                          p.copies[c].sizes().vec());
            p.main_grad = p.main_grad.defined() ? p.main_grad + g : g.clone();
            if (!ranks.local[owner]) remote_owners.insert(owner);
          } else if (ranks.local[owner]) {
            tr->send(owner, root, collective(idx * 64 + static_cast<int>(c), step, kGradToRoot), grad_of(c));
          }
        }
        if (ranks.local[root]) {
          for (int owner : remote_owners) tr->send(root, owner, collective(idx, step, kSumToOwner), p.main_grad);
        } else {
          bool mine = false;
          for (int st : p.stages) mine = mine || ranks.is_local_stage(st);
          if (mine) p.main_grad = tr->recv(me, root, collective(idx, step, kSumToOwner), p.copies[0].sizes().vec());
        }
      }
      if (rec) rec->write(step, "grad", to_record(p.name, p.main_grad));
    }

    // Optional clipping with the global norm summed in canonical parameter order on rank 0.
    if (clip > 0.0) {
      double coeff = 1.0;
      if (ranks.records()) {
        double sumsq = 0.0;
        for (auto& p : params) {
          auto g = p.main_grad.to(at::kDouble);
          sumsq += (g * g).sum().item<double>();
        }
        const double norm = std::sqrt(sumsq);
        coeff = std::min(clip / (norm + 1e-6), 1.0);
        rec->set_step_attr(step, "grad_norm", norm);
        rec->set_step_attr(step, "clip_coeff", coeff);
        for (int r = 1; r < ranks.P && !ranks.all_local(); ++r) {
          tr->send(root, r, collective(0, step, kClip), at::full({1}, coeff, at::kDouble).to(device));
        }
      } else {
        coeff = tr->recv(me, root, collective(0, step, kClip), {1}).cpu().item<double>();
      }
      if (coeff < 1.0) {
        for (auto& p : params) {
          if (p.main_grad.defined()) p.main_grad.mul_(coeff);
        }
      }
    }

    // Adam (decoupled weight decay): every local copy of a parameter is updated from the same
    // main grad and the same state, so copies stay bitwise equal.
    const double bc1 = 1.0 - std::pow(training.adam_beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(training.adam_beta2, static_cast<double>(step));
    for (size_t pi = 0; pi < params.size(); ++pi) {
      auto& p = params[pi];
      int first_local = -1;
      for (size_t c = 0; c < p.copies.size(); ++c) {
        if (ranks.is_local_stage(p.stages[c])) {
          first_local = static_cast<int>(c);
          break;
        }
      }
      if (first_local >= 0) {
        at::Tensor w = p.copies[first_local];
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
        for (size_t c = first_local + 1; c < p.copies.size(); ++c) {
          if (!ranks.is_local_stage(p.stages[c])) continue;
          // Megatron keeps copies equal by summing their grads over the embedding group and
          // applying the same update; here the update is computed once and copied.
          p.copies[c].copy_(w);
        }
      }
      // The recording rank needs every weight.
      const int owner = ranks.owner(p.stages[0]);
      if (!ranks.all_local() && owner != root && p.copies.size() == 1) {
        if (ranks.local[owner]) tr->send(owner, root, collective(static_cast<int>(pi), step, kWeightToRecord), p.copies[0]);
        else if (ranks.records()) {
          auto w = tr->recv(root, owner, collective(static_cast<int>(pi), step, kWeightToRecord), p.copies[0].sizes().vec());
          rec->write(step, "weight", to_record(p.name, w));
          continue;
        }
      }
      if (rec) rec->write(step, "weight", to_record(p.name, p.copies[first_local >= 0 ? first_local : 0]));
    }
  }
  if (rec) rec->commit();
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace mtp::engine
