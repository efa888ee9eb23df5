#include "harness/engine/plan.h"

#include <fmt/format.h>

#include "harness/common/error.h"
#include "harness/engine/chunk.h"
#include "kernels/ops.h"

namespace mtp::engine {

namespace {

/// inject = <fault>: the planted bug must be able to change this run (a fault that cannot take
/// effect would leave a record bitwise equal to the clean one and prove nothing), and must not
/// stop it before any expectation is evaluated. InputError naming the missing precondition.
void check_fault_applies(const RunPlan& plan) {
  using config::Fault;
  const config::VariantSpec& v = plan.variant;
  const Fault f = plan.model.inject;
  auto refuse = [&](const std::string& rule) {
    throw InputError(
        fmt::format("variant \"{}\": inject = \"{}\" {}", v.name, config::enum_name(f), rule));
  };
  const int64_t D = plan.model.mtp_num_layers;
  switch (f) {
    case Fault::kNone:
      return;
    case Fault::kMtpEmbeddingOutOfGroup:
      if (D == 0 || plan.layout.mtp_stage <= 0) refuse("needs MTP on a stage other than the first");
      if (plan.variant.embedding_copy_update != config::EmbeddingCopyUpdate::kBroadcast &&
          !plan.training.record_copies) {
        refuse(
            "needs embedding_copy_update = \"broadcast\" or [training] record_copies = true: "
            "with replicated copies the replica check stops the run at step 1 (exit 3) before "
            "any expectation is evaluated");
      }
      return;
    case Fault::kEmbeddingNormCountedTwice:
      if (!(plan.clip_grad > 0.0)) refuse("needs clip_grad > 0 (no norm is computed without it)");
      return;
    case Fault::kMtpScaleWithoutOneOverD:
      if (D < 2) refuse(fmt::format("needs mtp_num_layers >= 2 (λ/D = λ at D = {})", D));
      return;
    case Fault::kMtpScaleWithoutOneOverM:
    case Fault::kGradsZeroedBetweenMicrobatches:
      if (plan.num_microbatches < 2) {
        refuse(fmt::format("needs at least 2 microbatches per rank (this run: {})",
                           plan.num_microbatches));
      }
      if (f == Fault::kMtpScaleWithoutOneOverM && D == 0) refuse("needs mtp_num_layers >= 1");
      return;
    case Fault::kMtpLossMainMaskCount:
    case Fault::kMtpLabelsRolledOnceMore:
      if (D == 0) refuse("needs mtp_num_layers >= 1");
      return;
    case Fault::kAdamBiasCorrectionOff:
      return;  // every run takes an optimizer step
    case Fault::kMtpLocalTokenCount:
      if (!plan.model.calculate_per_token_loss) {
        refuse("needs calculate_per_token_loss = true (the bug is in the per-token rescaling)");
      }
      if (D == 0) refuse("needs mtp_num_layers >= 1");
      if (plan.data_parallel_size() < 2) {
        refuse("needs dp >= 2 (at dp = 1 the rank's counts are the global batch's)");
      }
      return;
    case Fault::kMtpLossScaleWithoutCp:
      if (plan.context_parallel_size() < 2) refuse("needs cp >= 2 (the missing factor is CP)");
      if (D == 0) refuse("needs mtp_num_layers >= 1");
      if (plan.model.calculate_per_token_loss) {
        refuse("needs calculate_per_token_loss = false (the per-token loss has no CP factor)");
      }
      return;
    case Fault::kStandaloneStageFedZeros:
      if (!plan.layout.mtp_standalone) {
        refuse(
            fmt::format("needs a standalone MTP stage (layout \"{}\" has none)", plan.layout.text));
      }
      return;
  }
}

/// cp > 1: the preconditions of context parallelism as built (model/context_parallel.h), the
/// first one broken named with this run's value and the reason.
void check_context_parallel(const RunPlan& plan) {
  const config::VariantSpec& v = plan.variant;
  const int cp = v.context_parallel_size;
  auto refuse = [&v, cp](const std::string& rule) {
    throw InputError(fmt::format("variant \"{}\": cp = {} {}", v.name, cp, rule));
  };
  if (const std::string why = config::context_parallel_misfit(plan.model, cp); !why.empty()) {
    refuse(why);
  }
  if (plan.model.attention_backend != config::AttentionBackend::kUnfused) {
    refuse(fmt::format(
        "needs attention_backend = \"unfused\" (the {} kernel takes no global positions)",
        config::enum_name(plan.model.attention_backend)));
  }
  if (plan.model.accumulation == config::Accumulation::kCanonical) {
    refuse("needs accumulation = \"megatron\" (canonical holders are data-parallel replicas)");
  }
}

/// ep > 1: the preconditions of expert parallelism as built (model/expert_parallel.h), the first
/// one broken named with this run's value and the reason.
void check_expert_parallel(const RunPlan& plan) {
  const config::VariantSpec& v = plan.variant;
  const int ep = v.expert_parallel_size;
  auto refuse = [&v, ep](const std::string& rule) {
    throw InputError(fmt::format("variant \"{}\": ep = {} {}", v.name, ep, rule));
  };
  if (const std::string why = config::expert_parallel_misfit(plan.model, ep); !why.empty()) {
    refuse(why);
  }
  const int group = v.data_parallel_size * v.context_parallel_size;
  if (group % ep != 0) {
    refuse(
        fmt::format("needs dp · cp ({}) to be a multiple of ep: the EP groups are cut from "
                    "the data-parallel ranks (Megatron: expert ranks regroup the same ranks)",
                    group));
  }
  if (v.optimizer == config::Optimizer::kDistributedAdam) {
    refuse(
        "needs optimizer = \"adam\": the expert buffers are not sharded over the "
        "expert-data-parallel group");
  }
  if (plan.model.accumulation == config::Accumulation::kCanonical) {
    refuse("needs accumulation = \"megatron\" (canonical holders are data-parallel replicas)");
  }
  if (plan.training.record_copies) {
    refuse(
        "needs record_copies off ([training] record_copies = false and no --record-copies): a "
        "routed expert has copies only in its expert-data-parallel group");
  }
}

/// cuda_graphs = true: the preconditions of engine/microbatch_graph.h (one stage) and
/// engine/chunk_graphs.h (pipelined), the first one broken named with this run's value and the
/// reason.
void check_cuda_graphs(const RunPlan& plan) {
  const config::VariantSpec& v = plan.variant;
  auto refuse = [&v](const std::string& rule) {
    throw InputError(fmt::format("variant \"{}\": cuda_graphs = true {}", v.name, rule));
  };
  if (plan.training.device != config::Device::kCuda) {
    refuse(fmt::format("needs device = \"cuda\" (this run: {})",
                       config::enum_name(plan.training.device)));
  }
  if (plan.training.dtype != config::DType::kBFloat16) {
    refuse(
        fmt::format("needs dtype = \"bfloat16\" (this run: {}): only then is every grad "
                    "moved into its main grad inside the captured microbatch",
                    config::enum_name(plan.training.dtype)));
  }
  if (plan.model.accumulation == config::Accumulation::kCanonical) {
    refuse(
        "needs accumulation = \"megatron\": canonical accumulation keeps each microbatch's "
        "contributions apart outside the captured graph");
  }
  if (schedule::schedule_def(plan.schedule.kind).combined_steps) {
    refuse(fmt::format(
        "needs a plain schedule, not {} (it interleaves two microbatches' nodes; a graph "
        "holds a chunk's whole forward or backward)",
        schedule::schedule_kind_name(plan.schedule.kind)));
  }
  if (v.context_parallel_size != 1) {
    refuse(
        fmt::format("needs cp = 1 (this variant: {}): context-parallel attention exchanges K "
                    "and V between ranks inside the forward, which a graph cannot hold",
                    v.context_parallel_size));
  }
  if (plan.model.kernels != config::Kernels::kHarness) {
    refuse(
        "needs kernels = \"harness\": LibTorch's CUDA embedding backward reads a count back "
        "to the host, which a capture forbids");
  }
  if (plan.model.num_moe_experts > 0) {
    refuse("needs a dense model (num_moe_experts = 0): MoE permutes tokens on the host");
  }
  if (plan.model.calculate_per_token_loss) {
    refuse(
        "needs calculate_per_token_loss = false: the per-token loss's token counts change "
        "every step, and a captured graph would keep the first step's");
  }
}

}  // namespace

std::string RunPlan::extra_parallel_sizes() const {
  std::string s;
  if (context_parallel_size() > 1) s += fmt::format(", CP {}", context_parallel_size());
  if (expert_parallel_size() > 1) s += fmt::format(", EP {}", expert_parallel_size());
  return s;
}

int RunPlan::microbatch_group_size() const {
  if (!schedule::schedule_def(schedule.kind).takes_group_size) return 0;
  return schedule.microbatch_group_size ? schedule.microbatch_group_size : schedule.pipeline_size;
}

layout::PipelineLayout variant_layout(const config::VariantSpec& v,
                                      const config::ModelConfig& model) {
  const int N = static_cast<int>(model.num_layers), D = static_cast<int>(model.mtp_num_layers);
  if (v.layout.empty()) return layout::default_layout(v.pipeline_size, v.virtual_size, N, D);
  return layout::build_layout(v.layout, v.pipeline_size, N, D, config::mtp_rule(v.implementation));
}

schedule::ScheduleConfig variant_schedule(const config::VariantSpec& v,
                                          const layout::PipelineLayout& l,
                                          int64_t num_microbatches) {
  schedule::ScheduleConfig s;
  s.kind =
      v.schedule ? *v.schedule : schedule::default_schedule_kind(l.pipeline_size, l.virtual_size);
  const schedule::ScheduleDef& def = schedule::schedule_def(s.kind);
  s.pipeline_size = l.pipeline_size;
  s.virtual_size = l.virtual_size;
  s.num_microbatches = static_cast<int>(num_microbatches);
  s.microbatch_group_size = v.microbatch_group_size;
  schedule::validate(s);
  if (v.overlap_p2p && !def.overlaps_p2p) {
    throw InputError(
        fmt::format("variant \"{}\": overlap_p2p needs the interleaved or combined_1f1b "
                    "schedule (Megatron overlap_p2p_comm), not {}",
                    v.name, schedule::schedule_kind_name(s.kind)));
  }
  return s;
}

RunPlan plan_variant(const config::ModelConfig& model, const config::TrainingConfig& training,
                     const config::VariantSpec& variant, const Implementation& impl) {
  RunPlan plan;
  plan.model = config::variant_model(model, variant);
  plan.model.validate();
  plan.training = training;
  plan.variant = variant;
  if (training.steps < 1) {
    throw InputError(fmt::format("training: steps = {} must be >= 1", training.steps));
  }
  if (training.init_from && training.resume_from) {
    throw InputError(
        fmt::format("training: init_from = \"{}\" and resume_from = \"{}\" "
                    "exclude each other (a resumed run takes the resumed step's "
                    "weights)",
                    training.init_from->text(), training.resume_from->text()));
  }
  if (training.resume_from && training.resume_from->step >= training.steps) {
    throw InputError(
        fmt::format("training: resume_from step {} is not before steps = {} "
                    "(nothing left to run)",
                    training.resume_from->step, training.steps));
  }
  if (variant.data_parallel_size < 1) {
    throw InputError(fmt::format("variant \"{}\": dp = {} must be >= 1", variant.name,
                                 variant.data_parallel_size));
  }
  if (variant.ddp_bucket_size < 0) {
    throw InputError(
        fmt::format("variant \"{}\": ddp_bucket_size = {} must be >= 0 (0 = one "
                    "bucket)",
                    variant.name, variant.ddp_bucket_size));
  }
  if (plan.model.attention_backend == config::AttentionBackend::kFlash &&
      (training.dtype != config::DType::kBFloat16 || training.device != config::Device::kCuda ||
       !kernels::flash_attention_available())) {
    throw InputError(fmt::format(
        "variant \"{}\": attention_backend = \"flash\" needs dtype = \"bfloat16\", device = "
        "\"cuda\" and a CUDA LibTorch >= 2.0 (this run: {}, {}{})",
        variant.name, config::enum_name(training.dtype), config::enum_name(training.device),
        kernels::flash_attention_available() ? "" : ", no flash attention in this build"));
  }
  plan.clip_grad = variant.clip_grad.value_or(training.clip_grad);
  plan.record_mode = variant.record.value_or(training.record);
  plan.num_microbatches = config::variant_num_microbatches(training, plan.model, variant);
  plan.layout = variant_layout(variant, plan.model);
  impl.check_layout(plan.layout);
  plan.schedule = variant_schedule(variant, plan.layout, plan.num_microbatches);
  if (variant.cuda_graphs) check_cuda_graphs(plan);
  if (variant.context_parallel_size > 1) check_context_parallel(plan);
  if (variant.expert_parallel_size > 1) check_expert_parallel(plan);
  if (plan.model.calculate_per_token_loss &&
      plan.model.accumulation == config::Accumulation::kCanonical) {
    throw InputError(fmt::format(
        "variant \"{}\": accumulation = \"canonical\" needs calculate_per_token_loss = false "
        "(its fold sums each microbatch's mean-normalised contribution; the per-token loss's "
        "division by the global count after the sum is not folded)",
        variant.name));
  }
  if (plan.model.inject != config::Fault::kNone) check_fault_applies(plan);
  const int max_depths = schedule::schedule_def(plan.schedule.kind).max_mtp_num_layers;
  if (max_depths >= 0 && plan.model.mtp_num_layers > max_depths) {
    throw InputError(
        fmt::format("variant \"{}\": {} supports mtp_num_layers <= {} (Megatron "
                    "transformer_config.py precondition), the model has {}",
                    variant.name, schedule::schedule_kind_name(plan.schedule.kind), max_depths,
                    plan.model.mtp_num_layers));
  }
  return plan;
}

}  // namespace mtp::engine
