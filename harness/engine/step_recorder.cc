#include "harness/engine/step_recorder.h"

#include <fmt/format.h>

#include <cstring>

#include "harness/common/error.h"
#include "harness/engine/determinism.h"
#include "harness/engine/dtypes.h"
#include "harness/gpu/gpu.h"

#ifndef MTP_GIT_REVISION
#define MTP_GIT_REVISION "unknown"
#endif

namespace mtp::engine {
namespace {


void write_attributes(record::RecordWriter& rec, const RunPlan& plan,
                      const data::MicrobatchSource& source, const RecordContext& ctx) {
  const config::ModelConfig& cfg = plan.model;
  const config::TrainingConfig& training = plan.training;
  const layout::PipelineLayout& layout = plan.layout;
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
  rec.set_attr("kernels", config::enum_name(cfg.kernels));
  rec.set_attr("attention_backend", config::enum_name(cfg.attention_backend));
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
  rec.set_attr("clip_grad", plan.clip_grad);
  // The variant.
  rec.set_attr("variant", plan.variant.name);
  rec.set_attr("implementation", ctx.implementation);
  rec.set_attr("layout", layout.text);
  rec.set_attr("P", int64_t{layout.pipeline_size});
  rec.set_attr("V", int64_t{layout.virtual_size});
  rec.set_attr("M", plan.num_microbatches);
  rec.set_attr("global_batch_size",
               plan.num_microbatches * cfg.micro_batch_size * plan.data_parallel_size());
  rec.set_attr("data_parallel_size", int64_t{plan.data_parallel_size()});
  rec.set_attr("world_size", int64_t{plan.world_size()});
  rec.set_attr("optimizer", config::enum_name(plan.variant.optimizer));
  rec.set_attr("use_distributed_optimizer",
               int64_t{plan.variant.optimizer == config::Optimizer::kDistributedAdam ? 1 : 0});
  rec.set_attr("embedding_copy_update", config::enum_name(plan.variant.embedding_copy_update));
  rec.set_attr("ddp_bucket_size", plan.variant.ddp_bucket_size);
  rec.set_attr("microbatch_group_size", int64_t{plan.microbatch_group_size()});
  rec.set_attr("schedule", schedule::schedule_kind_name(plan.schedule.kind));
  rec.set_attr("overlap_p2p_comm", int64_t{plan.variant.overlap_p2p ? 1 : 0});
  rec.set_attr("mtp_standalone", int64_t{layout.mtp_standalone ? 1 : 0});
  rec.set_attr("seed", static_cast<int64_t>(training.seed));
  rec.set_attr("dtype", config::enum_name(training.dtype));
  rec.set_attr("device", config::enum_name(training.device));
  rec.set_attr("execution", ctx.execution);
  rec.set_attr("data_source", source.describe());
  rec.set_attr("data_sha256", source.sha256());
  for (const auto& [k, v] : ctx.start_attrs) rec.set_attr(k, v);
  rec.set_attr("git_revision", std::string(MTP_GIT_REVISION));
  rec.set_attr("chunk_map", fmt::format("{}", fmt::join(ctx.chunk_map, "\n")));
  for (const auto& [k, v] : determinism_fingerprint()) rec.set_attr(k, v);
  if (training.device == config::Device::kCuda) {
    for (const auto& [k, v] : gpu::gpu_fingerprint(ctx.device_index)) rec.set_attr(k, v);
  }
  rec.set_attr("scenario", ctx.scenario_name);
}

}  // namespace

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
    case at::kBFloat16: d.dtype = record::DType::kBF16; break;
    default: throw InternalError(fmt::format("cannot record dtype of {}", name));
  }
  d.bytes.resize(c.nbytes());
  if (c.nbytes() > 0) std::memcpy(d.bytes.data(), c.data_ptr(), c.nbytes());
  return d;
}

StepRecorder::StepRecorder(const std::string& path, const RunPlan& plan,
                           const data::MicrobatchSource& source, const RecordContext& context)
    : plan_(plan),
      loss_dtype_(context.loss_dtype ? scalar_type(*context.loss_dtype)
                                     : main_type(plan.training.dtype)),
      writer_(std::make_unique<record::RecordWriter>(path)) {
  write_attributes(*writer_, plan, source, context);
}

void StepRecorder::write_batch(int64_t step, const at::Tensor& tokens, const at::Tensor& labels,
                               const at::Tensor& loss_mask) {
  const int s = static_cast<int>(step);
  writer_->write(s, "batch", to_record("tokens", tokens));
  writer_->write(s, "batch", to_record("labels", labels));
  writer_->write(s, "batch", to_record("loss_mask", loss_mask));
}

double StepRecorder::write_losses(int64_t step, const std::vector<double>& lm_per_mb,
                                  const std::vector<std::vector<double>>& mtp_per_mb) {
  const int D = static_cast<int>(plan_.model.mtp_num_layers);
  const auto K = static_cast<double>(lm_per_mb.size());
  // Per-microbatch values averaged in microbatch order (float64).
  double lm = 0.0;
  for (double v : lm_per_mb) lm += v;
  lm /= K;
  std::vector<double> mtp(D, 0.0);
  for (int k = 0; k < D; ++k) {
    for (const auto& per_depth : mtp_per_mb) mtp[k] += per_depth[k];
    mtp[k] /= K;
  }
  double total = lm, mtp_sum = 0.0;
  for (double v : mtp) mtp_sum += v;
  if (D > 0) total += plan_.model.mtp_loss_scaling_factor / static_cast<double>(D) * mtp_sum;
  // Averages are taken in float64, then stored in the training dtype (fp32 for bf16 runs, whose
  // losses are computed in fp32) so that ulp:N counts units of that dtype.
  auto scalar = [this](double v) { return at::scalar_tensor(v, at::kDouble).to(loss_dtype_); };
  const int s = static_cast<int>(step);
  writer_->write(s, "loss", to_record("lm", scalar(lm)));
  for (int k = 0; k < D; ++k) {
    writer_->write(s, "loss", to_record(fmt::format("mtp_{}", k + 1), scalar(mtp[k])));
  }
  writer_->write(s, "loss", to_record("total", scalar(total)));
  return total;
}

void StepRecorder::write_tensor(int64_t step, const std::string& group, const std::string& name,
                                const at::Tensor& t) {
  writer_->write(static_cast<int>(step), group, to_record(name, t));
}

void StepRecorder::set_step_attr(int64_t step, const std::string& key, double value) {
  writer_->set_step_attr(static_cast<int>(step), key, value);
}

void StepRecorder::commit() { writer_->commit(); }

}  // namespace mtp::engine
