#include "harness/engine/resource_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "harness/common/error.h"
#include "harness/config/param_specs.h"
#include "harness/engine/chunk.h"
#include "harness/record/digest.h"
#include "harness/sim/activation.h"

namespace mtp::engine {
namespace {

uint64_t dtype_bytes(config::DType d) {
  switch (d) {
    case config::DType::kFloat64:
      return 8;
    case config::DType::kBFloat16:
      return 2;
    case config::DType::kFloat32:
      break;
  }
  return 4;
}

/// Main grads and masters: fp32 for bf16, else the training dtype (engine/dtypes.h main_type).
uint64_t main_bytes(config::DType d) { return d == config::DType::kBFloat16 ? 4 : dtype_bytes(d); }

/// Saved activations of model chunk `stage` for one microbatch on one context-parallel rank, in
/// bytes (sim/activation.h).
uint64_t stage_activation_bytes(const RunPlan& plan, const layout::StagePlan& st) {
  return sim::stage_activation_bytes(plan.model, st, dtype_bytes(plan.training.dtype),
                                     plan.context_parallel_size());
}

/// The most activation bytes pipeline rank `p` holds at any point of its op order.
uint64_t peak_activation_bytes(const RunPlan& plan, int p) {
  const int V = plan.layout.virtual_size;
  std::vector<uint64_t> per_mb(V);
  for (int v = 0; v < V; ++v) per_mb[v] = stage_activation_bytes(plan, plan.layout.at(p, v));
  std::vector<int64_t> in_flight(V, 0);
  uint64_t now = 0, peak = 0;
  for (const schedule::Op& op : schedule::rank_ops(plan.schedule, p)) {
    const int v = op.chunk;
    if (op.type == schedule::OpType::kForward) {
      ++in_flight[v];
      now += per_mb[v];
    } else {
      --in_flight[v];
      now -= per_mb[v];
    }
    peak = std::max(peak, now);
  }
  return peak;
}

}  // namespace

uint64_t ResourceEstimate::memory_bytes() const {
  return weight_bytes + grad_bytes + optimizer_bytes + activation_bytes +
         (staging_on_device ? staging_bytes : 0);
}

std::string format_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string ResourceEstimate::describe() const {
  return fmt::format(
      "{} of memory (weights {}, grads {}, optimizer {}, activations {}, {}staging "
      "{}; {} parameters); record {}",
      format_bytes(memory_bytes()), format_bytes(weight_bytes), format_bytes(grad_bytes),
      format_bytes(optimizer_bytes), format_bytes(activation_bytes),
      staging_on_device ? "" : "host ", format_bytes(staging_bytes), parameters,
      format_bytes(record_bytes));
}

ResourceEstimate estimate_resources(const RunPlan& plan, const Implementation& impl) {
  const config::ModelConfig& m = plan.model;
  const config::DType dtype = plan.training.dtype;
  const uint64_t e = dtype_bytes(dtype);
  const uint64_t me = main_bytes(dtype);
  const bool bf16 = dtype == config::DType::kBFloat16;
  const bool distributed = plan.variant.optimizer == config::Optimizer::kDistributedAdam;
  const int P = plan.layout.pipeline_size;
  // Every rank of a pipeline rank's gradient group (DP·CP ranks) holds the same chunks; the
  // optimizer shards over all of them; a routed expert sits on 1 of every EP of them.
  const int DP = plan.data_parallel_size() * plan.context_parallel_size();
  const uint64_t EP = static_cast<uint64_t>(plan.expert_parallel_size());

  std::map<std::string, uint64_t> numel;
  ResourceEstimate est;
  for (const auto& spec : config::parameter_specs(m)) {
    uint64_t n = 1;
    for (int64_t d : spec.shape) n *= static_cast<uint64_t>(d);
    numel[spec.name] = n;
    est.parameters += n;
  }
  est.per_rank_bytes.assign(static_cast<size_t>(plan.world_size()), 0);
  for (int p = 0; p < P; ++p) {
    uint64_t copies = 0;  // parameters of every chunk of pipeline rank p
    for (int v = 0; v < plan.layout.virtual_size; ++v) {
      const int stage = plan.layout.at(p, v).stage_index;
      for (const auto& name : impl.stage_param_names(plan.layout, stage, m)) {
        const auto it = numel.find(name);
        MTP_INTERNAL_ASSERT(it != numel.end(), fmt::format("no parameter spec for {}", name));
        // Equal-sized experts, E/EP per EP rank: each rank holds exactly 1/EP of their elements.
        copies += config::routed_expert_index(name) >= 0 ? it->second / EP : it->second;
      }
    }
    const uint64_t weights = copies * e;
    const uint64_t grads = copies * (me + e);
    uint64_t optimizer = 2 * copies * me / (distributed ? static_cast<uint64_t>(DP) : 1);
    if (distributed) {
      optimizer += copies * (me + e);  // full flat masters and the parameters' all-gather buffer
    } else if (bf16) {
      optimizer += copies * me;  // masters
    }
    const uint64_t activations =
        peak_activation_bytes(plan, p) + sim::attention_workspace_bytes(m, e);
    for (int d = 0; d < DP; ++d) {
      est.weight_bytes += weights;
      est.grad_bytes += grads;
      est.optimizer_bytes += optimizer;
      est.activation_bytes += activations;
      est.per_rank_bytes[static_cast<size_t>(d + DP * p)] =
          weights + grads + optimizer + activations;
    }
  }
  est.staging_bytes = est.parameters * (8 + 2 * me);
  est.staging_on_device = plan.training.device == config::Device::kCpu;
  if (est.staging_on_device && !est.per_rank_bytes.empty()) {
    est.per_rank_bytes[0] += est.staging_bytes;  // the recording rank
  }
  // Record: the start step's weights, then per step what record/schema.h says the step holds.
  // HDF5 spends about kDatasetOverheadBytes per dataset (object header, link, attributes):
  // measured on records of the tiny test model, where it is 18% of the file. A digest-only
  // tensor keeps 16 bytes per block of 64 Ki elements besides its header.
  constexpr uint64_t kDatasetOverheadBytes = 390;
  const ParamPlacement placement = place_params(impl, plan.layout, m);
  const record::StepContents contents = step_contents(plan, &placement);
  const record::Storage default_storage = default_step_storage(plan);
  auto step_bytes = [&](int64_t step) {
    const bool full = step_storage(plan, step, default_storage) == record::Storage::kFull;
    uint64_t bytes = 0;
    for (const auto& t : record::step_tensors(contents, step == 0)) {
      const bool always_full = t.group == record::Group::kBatch || t.group == record::Group::kLoss;
      const uint64_t blocks = (static_cast<uint64_t>(t.numel) + record::kDigestBlockElements - 1) /
                              record::kDigestBlockElements;
      bytes += kDatasetOverheadBytes + (full || always_full ? t.nbytes() : 16 * (blocks + 1));
    }
    return bytes;
  };
  est.record_bytes = step_bytes(0);
  for (int64_t step = 1; step <= plan.training.steps; ++step) est.record_bytes += step_bytes(step);
  return est;
}

record::Storage default_step_storage(const RunPlan& plan) {
  switch (plan.record_mode) {
    case config::RecordMode::kFull:
      return record::Storage::kFull;
    case config::RecordMode::kDigest:
      return record::Storage::kDigest;
    case config::RecordMode::kAuto:
      break;
  }
  return step_tensor_bytes(plan) <= config::kAutoFullStepBytes ? record::Storage::kFull
                                                               : record::Storage::kDigest;
}

record::StepContents step_contents(const RunPlan& plan, const ParamPlacement* placement) {
  record::StepContents c;
  for (const auto& spec : config::parameter_specs(plan.model)) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    c.params.push_back({spec.name, n});
  }
  c.mtp_num_layers = plan.model.mtp_num_layers;
  c.batch_samples = plan.num_microbatches * plan.data_parallel_size();
  c.tokens_per_sample = plan.model.micro_batch_size * plan.model.seq_length;
  c.main_dtype =
      plan.training.dtype == config::DType::kFloat64 ? record::DType::kF64 : record::DType::kF32;
  if (plan.training.dtype == config::DType::kBFloat16) c.model_dtype = record::DType::kBF16;
  c.optimizer_state = plan.training.save_optimizer_state;
  if (placement != nullptr && plan.training.record_copies) {
    for (const ParamCopy& copy : param_copies(*placement, plan.data_parallel_size())) {
      c.copies.push_back({copy.name, c.params[copy.param].numel});
    }
  }
  return c;
}

uint64_t step_tensor_bytes(const RunPlan& plan) {
  uint64_t bytes = 0;
  for (const auto& t : record::step_tensors(step_contents(plan), false)) {
    if (t.group != record::Group::kBatch && t.group != record::Group::kLoss) bytes += t.nbytes();
  }
  return bytes;
}

void require_resources(const ResourceEstimate& estimate, bool all_ranks_share_memory,
                       uint64_t memory_limit, const std::string& memory_name, uint64_t disk_free,
                       const std::string& where, const std::string& remedy) {
  const uint64_t need = all_ranks_share_memory ? estimate.memory_bytes()
                                               : *std::max_element(estimate.per_rank_bytes.begin(),
                                                                   estimate.per_rank_bytes.end());
  if (memory_limit > 0 && need > memory_limit) {
    throw InputError(fmt::format(
        "{}: needs about {} of memory{} but {} is {}: estimate {} ({})", where, format_bytes(need),
        all_ranks_share_memory ? " (all ranks in this process)" : "", memory_name,
        format_bytes(memory_limit), estimate.describe(), remedy));
  }
  if (disk_free > 0 && estimate.record_bytes > disk_free) {
    throw InputError(fmt::format(
        "{}: its record needs about {} but the output directory has {} "
        "free: estimate {}",
        where, format_bytes(estimate.record_bytes), format_bytes(disk_free), estimate.describe()));
  }
}

}  // namespace mtp::engine
