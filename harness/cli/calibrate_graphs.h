// File: harness/cli/calibrate_graphs.h
//
// `mtp-harness calibrate --cuda-graphs`: node costs timed with every chunk's forward and backward
// replayed as CUDA graphs, so that a cost is the device's work without the host's issue time
// (issue 23; on an H100 the small model's eager calibration bursts are host-bound and priced a
// graphed one-layer op at 3.6x its time). The preset's dense layers run two pipelined layouts
// with ranks as threads (sim/graphed_costs.h: each stage one node kind), every op timed by
// measure_ops (calibrate_validate.h), and the node costs are read off the stage medians by
// sim::costs_from_graphed_stages.
#pragma once

#include <string>
#include <vector>

#include "harness/command_line/options.h"
#include "harness/config/model_config.h"
#include "harness/sim/costs.h"

namespace mtp::cli {

/// Plans both graphed layouts for `model` without running anything (calibrate calls it before
/// timing or writing). Throws InputError naming the rule broken: a model with MoE layers (CUDA
/// graphs need a dense model), no MTP depth, or the planner's graph rules.
void check_graphed_calibration(const config::ModelConfig& model, const CalibrateOptions& opt);

/// Times both layouts on CUDA device 0 (bf16, flash, harness kernels, deterministic; opt.warmup
/// + opt.repeats steps of opt.validate_microbatches microbatches, rounded up to a multiple of
/// each layout's P as the interleaved schedule needs) and fills `t`'s nodes,
/// measured_at and notes (the stage times among them); returns the notes calibrate prints (the
/// stage times and the rule that turns them into costs). Throws InputError as
/// check_graphed_calibration, InfraError when the device fails.
std::vector<std::string> calibrate_graphed(const config::ModelConfig& model,
                                           const CalibrateOptions& opt, sim::CostTable& t);

}  // namespace mtp::cli
