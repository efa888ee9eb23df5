// File: harness/cli/calibrate_support.h
//
// What `mtp-harness calibrate` times, built once for its node timing (calibrate_command.cc) and
// its validation (calibrate_validate.cc): a model of a preset's dimensions on a layout, with fast
// initial weights and random microbatches, on this device in the precision the costs are for
// (CUDA: bf16, flash attention; CPU: fp32, unfused), harness kernels, deterministic algorithms.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/engine/chunk.h"
#include "harness/engine/plan.h"

namespace mtp::cli {

/// A built model ready to run steps: its plan, every stage's chunk, M microbatches [b, s].
struct TimedModel {
  engine::RunPlan plan;
  std::vector<std::unique_ptr<engine::ModelChunk>> chunks;  ///< one per stage
  std::vector<engine::MicrobatchTensors> microbatches;      ///< M, on the device
  at::Device device = at::Device(at::kCPU);
  /// Drops every chunk parameter's .grad (between timed steps).
  void reset_grads();
};

/// `cfg` on `layout` with P = `pipeline_size` run by `implementation` (the schedule derived from
/// P and V), `num_microbatches` random microbatches, on CUDA device 0 (bf16, flash) or the CPU
/// (fp32, unfused); `cuda_graphs`: planned with cuda_graphs = true (the planner's rules apply).
/// Throws InputError for a layout the model, P, the implementation or the graphs refuse.
TimedModel build_timed_model(const config::ModelConfig& cfg, const std::string& layout,
                             int pipeline_size, int num_microbatches, bool cuda,
                             config::Implementation implementation, bool cuda_graphs = false);

/// The plan build_timed_model runs (the planner's every rule, no tensor made). Throws as it.
engine::RunPlan plan_timed_model(const config::ModelConfig& cfg, const std::string& layout,
                                 int pipeline_size, int num_microbatches, bool cuda,
                                 config::Implementation implementation, bool cuda_graphs);

/// Time stamps on the device's work queue, so that timing never stops the host (a
/// synchronisation per node exposed the host's launch time that a real step hides: the first
/// H200 calibration timed the small model's nodes 2.2x slower than its step). On CUDA events on
/// the calling thread's current stream (gpu::DeviceClock): the span between two marks is the
/// device's, from the end of the work queued before the first to the end of the work queued
/// before the second, so a run of back-to-back marks splits the queue's time without gaps
/// (host-bound work counts at the rate the host issues it). On the CPU the host clock (ATen's
/// CPU ops are synchronous).
class Stopwatch {
 public:
  /// Throws InputError for `cuda` in a build without CUDA.
  explicit Stopwatch(bool cuda);
  ~Stopwatch();
  /// A time stamp now (CUDA: queued); its index. Thread-safe.
  int mark();
  /// Milliseconds from mark a to mark b (CUDA: waits for mark b). Throws InfraError for an index
  /// that is not a mark since the last clear(), or when CUDA fails.
  double elapsed_ms(int a, int b);
  /// Milliseconds of the host's clock from mark a to mark b (on CUDA the host's time issuing
  /// the work between them: near elapsed_ms, that work is host-bound). Throws InfraError like
  /// elapsed_ms.
  double host_elapsed_ms(int a, int b);
  /// Forgets every mark.
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The median of `v` (non-empty).
double median(std::vector<double> v);

}  // namespace mtp::cli
