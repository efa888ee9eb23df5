#include "harness/cli/calibrate_stages.h"

#include <algorithm>

#include <fmt/format.h>

#include <iostream>
#include <string>

#include "harness/cli/calibrate_support.h"
#include "harness/cli/calibrate_validate.h"
#include "harness/common/error.h"
#include "harness/gpu/gpu.h"
#include "harness/sim/graphed_costs.h"

namespace mtp::cli {
namespace {

/// One stage layout of the calibration: its text, P, and the implementation that runs it.
struct StageRun {
  const char* layout;
  int pipeline_size;
  int64_t num_layers;  ///< decoder layers the layout holds
  int64_t mtp_depths;
  config::Implementation implementation;  ///< standalone MTP: the candidate
};

constexpr StageRun kWithMtp{sim::kGraphedLayoutWithMtp, sim::kGraphedPipelineWithMtp, 5, 1,
                            config::Implementation::kCandidate};
constexpr StageRun kWithoutMtp{sim::kGraphedLayoutWithoutMtp, sim::kGraphedPipelineWithoutMtp, 4, 0,
                               config::Implementation::kReference};

/// M of run `r`: --microbatches rounded up to a multiple of its P (the interleaved schedule
/// needs the last microbatch group M mod P to be 0 or >= P; P = 3 with the default M = 8 is
/// neither).
int stage_microbatches(const StageRun& r, int requested) {
  const int p = r.pipeline_size;
  return (std::max(requested, 1) + p - 1) / p * p;
}

config::ModelConfig model_of(const config::ModelConfig& m, const StageRun& r) {
  config::ModelConfig c = m;
  c.num_layers = r.num_layers;
  c.mtp_num_layers = r.mtp_depths;
  return c;
}

/// The flag that asked for the stage calibration (its errors name it).
const char* flag_of(const CalibrateOptions& opt) {
  return opt.validate_cuda_graphs ? "--cuda-graphs" : "--from-stages";
}

bool on_cuda(const CalibrateOptions& opt) {
  return opt.validate_cuda_graphs || opt.device == "cuda";
}

void require_dense_with_mtp(const config::ModelConfig& m, const CalibrateOptions& opt) {
  if (m.num_moe_experts > 0) {
    throw InputError(fmt::format(
        "calibrate {}: preset \"{}\" has MoE layers; the stage layouts price dense layers "
        "only{}: calibrate it without {}",
        flag_of(opt), opt.preset,
        opt.validate_cuda_graphs ? " (and CUDA graphs cannot hold MoE, which permutes tokens on "
                                   "the host)"
                                 : "",
        flag_of(opt)));
  }
  if (m.mtp_num_layers < 1) {
    throw InputError(
        fmt::format("calibrate {}: preset \"{}\" has no MTP depth; the stage layouts time one",
                    flag_of(opt), opt.preset));
  }
}

sim::NodeCost stage(const MeasuredOps& m, int s, const StageRun& r, const CalibrateOptions& opt) {
  const auto f = m.stage_op_ms.find({s, true});
  const auto b = m.stage_op_ms.find({s, false});
  if (f == m.stage_op_ms.end() || b == m.stage_op_ms.end()) {
    throw InfraError(
        fmt::format("calibrate {}: stage {} of '{}' ran no timed op", flag_of(opt), s, r.layout));
  }
  return {f->second, b->second};
}

MeasuredOps run(const config::ModelConfig& m, const StageRun& r, const CalibrateOptions& opt) {
  const bool graphs = opt.validate_cuda_graphs, cuda = on_cuda(opt);
  TimedModel tm = build_timed_model(model_of(m, r), r.layout, r.pipeline_size,
                                    stage_microbatches(r, opt.validate_microbatches), cuda,
                                    r.implementation, graphs);
  MeasuredOps out = measure_ops(tm, opt.warmup, opt.repeats, cuda, graphs);
  if (graphs) gpu::release_cached_memory(0);  // the graphs' pools back before the next layout's
  return out;
}

std::string times(const sim::NodeCost& c) {
  return fmt::format("{:.4f} / {:.4f}", c.forward_ms, c.backward_ms);
}

}  // namespace

void check_stage_calibration(const config::ModelConfig& model, const CalibrateOptions& opt) {
  require_dense_with_mtp(model, opt);
  for (const StageRun& r : {kWithMtp, kWithoutMtp}) {
    (void)plan_timed_model(model_of(model, r), r.layout, r.pipeline_size,
                           stage_microbatches(r, opt.validate_microbatches), on_cuda(opt),
                           r.implementation, opt.validate_cuda_graphs);
  }
}

std::vector<std::string> calibrate_from_stages(const config::ModelConfig& model,
                                               const CalibrateOptions& opt, sim::CostTable& t) {
  check_stage_calibration(model, opt);  // both layouts plan before the first is timed
  // Stages: "E|t|ttt|t|m|L" → 0 E, 1 t, 2 ttt, 3 t, 4 m, 5 L; "E|t|ttt|L" → 0 E, 1 t, 2 ttt, 3 L.
  const MeasuredOps a = run(model, kWithMtp, opt);
  const MeasuredOps z = run(model, kWithoutMtp, opt);
  sim::GraphedStageTimes s;
  s.embedding = stage(z, 0, kWithoutMtp, opt);
  const sim::NodeCost t1 = stage(a, 1, kWithMtp, opt), t3 = stage(a, 3, kWithMtp, opt),
                      t1z = stage(z, 1, kWithoutMtp, opt);
  s.one_layer = {(t1.forward_ms + t3.forward_ms + t1z.forward_ms) / 3.0,
                 (t1.backward_ms + t3.backward_ms + t1z.backward_ms) / 3.0};
  const sim::NodeCost t3a = stage(a, 2, kWithMtp, opt), t3z = stage(z, 2, kWithoutMtp, opt);
  s.three_layers = {(t3a.forward_ms + t3z.forward_ms) / 2.0,
                    (t3a.backward_ms + t3z.backward_ms) / 2.0};
  s.mtp_block = stage(a, 4, kWithMtp, opt);
  s.loss_with_mtp = stage(a, 5, kWithMtp, opt);
  s.loss_without_mtp = stage(z, 3, kWithoutMtp, opt);
  std::vector<std::string> notes;
  for (const auto& [node, cost] : sim::costs_from_graphed_stages(s, &notes)) t.nodes[node] = cost;
  for (std::string& n : notes) t.notes.push_back(std::move(n));
  std::vector<std::string> shown;
  shown.push_back(fmt::format(
      "{} stage ops (ms per microbatch, forward / backward; medians of {} steps after {} "
      "warm-up, ranks as threads{}): E {}, t {} (mean of three), ttt {}, m {}, L with MTP {}, L "
      "without MTP {}; layouts '{}' (P = {}, M = {}) and '{}' (P = {}, M = {})",
      opt.validate_cuda_graphs ? "graphed" : "eager", opt.repeats, opt.warmup,
      opt.validate_cuda_graphs ? ", every chunk replayed as a CUDA graph"
                               : ", their computes one at a time",
      times(s.embedding), times(s.one_layer), times(s.three_layers), times(s.mtp_block),
      times(s.loss_with_mtp), times(s.loss_without_mtp), kWithMtp.layout, kWithMtp.pipeline_size,
      stage_microbatches(kWithMtp, opt.validate_microbatches), kWithoutMtp.layout,
      kWithoutMtp.pipeline_size, stage_microbatches(kWithoutMtp, opt.validate_microbatches)));
  shown.push_back(
      "stage costs (sim/graphed_costs.h): layer = (ttt - t) / 2, chunk_op = t - layer, each "
      "other node its stage less chunk_op; final_layernorm is priced inside output_head (the loss "
      "stage holds both); mtp_head = L with MTP - L without");
  t.notes.insert(t.notes.end(), shown.begin(), shown.end());
  t.measured_at = sim::measured_dimensions(model);
  t.measured_at["preset"] = opt.preset;
  const bool cuda = on_cuda(opt);
  t.measured_at["dtype"] = cuda ? "bfloat16" : "float32";
  t.measured_at["attention"] = cuda ? "flash" : "unfused";
  t.measured_at["kernels"] = "harness";
  t.measured_at["cuda_graphs"] = opt.validate_cuda_graphs;
  t.measured_at["from_stages"] = true;
  t.measured_at["microbatches"] = stage_microbatches(kWithMtp, opt.validate_microbatches);
  t.measured_at["repeats"] = opt.repeats;
  t.measured_at["warmup"] = opt.warmup;
  return shown;
}

}  // namespace mtp::cli
