// File: harness/cli/calibrate_validate.h
//
// `mtp-harness calibrate --validate LAYOUT --pp P`: the pipeline cost simulator checked against
// a measured run (issue 23 §3). The preset's whole model runs LAYOUT on P pipeline ranks as
// threads on this one device, M microbatches per step; every op's compute (a combined 1F1B pair
// as one block) is bracketed by ExecutionOptions::before_compute / after_compute and timed: on
// CUDA by events on the shared stream (gpu::DeviceClock), on the CPU by the host clock. The
// ranks' computes are serialised by a lock, so an op's time is its own and not the sum of every
// rank's kernels interleaved on the one device (the sends and receives stay concurrent). Each
// rank's sum of its op times (median over the timed steps) is set beside the simulator's busy
// time for that rank from `costs` (the simulator plays the same schedule::rank_ops); per stage
// the mean forward and backward op time beside the stage's price, with the host's time issuing
// the op (host clock inside the bracket: near the device time, the op is host-bound). The step
// time is not
// compared: P ranks sharing one device are not P devices.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "harness/cli/calibrate_support.h"
#include "harness/command_line/options.h"
#include "harness/config/model_config.h"
#include "harness/sim/costs.h"

namespace mtp::cli {

/// Medians over the timed steps of measure_ops, in ms: per pipeline rank the sum of its ops'
/// times; per (stage, forward?) the mean single op (combined 1F1B pairs are not split between
/// their two ops) and the host's time issuing it.
struct MeasuredOps {
  std::vector<double> rank_sum_ms;
  std::map<std::pair<int, bool>, double> stage_op_ms;
  std::map<std::pair<int, bool>, double> stage_host_ms;
};

/// Runs `warmup` + `repeats` steps of `tm`'s layout with its ranks as threads, every op's compute
/// timed one at a time (the file comment). `graphs`: every chunk's forward and backward replayed
/// as CUDA graphs (tm planned with cuda_graphs), main grads accumulated after each backward as a
/// run does (the graphs need it); the warm-up steps run the eager warm-up and the captures.
/// Throws InfraError when the device fails.
MeasuredOps measure_ops(TimedModel& tm, int warmup, int repeats, bool cuda, bool graphs);

/// Runs every --validate layout of `opt` for `model` against `costs` and prints the tables.
/// Returns kExitOk when every rank's measured op sum is within opt.tolerance (relative) of the
/// simulated busy time, kExitMismatch otherwise (the worst rank named). Throws InputError for a
/// layout the model or P refuses, InfraError when the device fails.
int validate_costs(const config::ModelConfig& model, const sim::CostTable& costs,
                   const CalibrateOptions& opt, bool cuda);

/// Plans every --validate run of `opt` for `model` (layout, P, schedule, and with --cuda-graphs
/// the graphs' rules) without running anything: calibrate calls it first, so that a run it
/// would refuse is refused before the calibration is timed and --out written. Throws InputError
/// naming the layout and the rule broken.
void check_validation_plans(const config::ModelConfig& model, const CalibrateOptions& opt,
                            bool cuda);

}  // namespace mtp::cli
