// File: harness/cli/calibrate_stages.h
//
// `mtp-harness calibrate --from-stages` (and `--cuda-graphs`, which implies it): node costs read
// off the ops of pipelined runs, timed as a --validate run times its ops, instead of per-node
// bursts on one thread (issue 23). The preset's dense layers run two pipelined layouts with
// ranks as threads (sim/graphed_costs.h: each stage one node kind), every op timed by
// measure_ops (calibrate_validate.h), and the node costs come from the stage medians by
// sim::costs_from_graphed_stages. With CUDA graphs an op's time is the device's work alone (on an
// H100 the small model's eager calibration bursts are host-bound and priced a graphed one-layer
// op at 3.6x its time); eager, it is what the host pays to issue an op on a rank thread beside
// the others (a validation's eager ops are host-bound, and a layer issued there cost ~30 % more
// than on the calibrating thread alone, 2026-12-08).
#pragma once

#include <string>
#include <vector>

#include "harness/command_line/options.h"
#include "harness/config/model_config.h"
#include "harness/sim/costs.h"

namespace mtp::cli {

/// Plans both stage layouts for `model` without running anything (calibrate calls it before
/// timing or writing): on CUDA with graphs when opt.validate_cuda_graphs, on opt.device
/// otherwise. Throws InputError naming the flag and the rule broken: a model with MoE layers
/// (the stages price dense layers; with graphs, MoE cannot be captured), no MTP depth, or the
/// planner's rules.
void check_stage_calibration(const config::ModelConfig& model, const CalibrateOptions& opt);

/// Times both layouts on opt.device (device 0 on CUDA; bf16, flash, harness kernels,
/// deterministic; every chunk replayed as a CUDA graph when opt.validate_cuda_graphs; opt.warmup
/// + opt.repeats steps of opt.validate_microbatches microbatches, rounded up to a multiple of
/// each layout's P as the interleaved schedule needs) and fills `t`'s nodes, measured_at and
/// notes (the stage times among them); returns the notes calibrate prints (the stage times and
/// the rule that turns them into costs). Throws InputError as check_stage_calibration,
/// InfraError when the device fails.
std::vector<std::string> calibrate_from_stages(const config::ModelConfig& model,
                                               const CalibrateOptions& opt, sim::CostTable& t);

}  // namespace mtp::cli
