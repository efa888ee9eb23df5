// File: harness/engine/trainer.h
//
// Trains one variant for its plan's steps and writes its HDF5 step record (architecture.md §3
// data flow, §6 schema). Every rank (pipeline rank × data-parallel rank) runs the same step loop
// (SPMD), whether as a thread of this process or as a process of a torchrun/mpirun launch:
//   microbatches of its data-parallel rank → its schedule's ops (executor) →
//   finalize_model_grads (data-parallel sync, embedding group) → [clip: canonical global norm] →
//   optimizer → [embedding copies broadcast] → replica check (every data-parallel replica and
//   every embedding copy bitwise equal to the recorded copy) → the recording rank (pipeline
//   rank 0, data-parallel rank 0) gathers the batch, losses, main grads and weights and writes
//   the record.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/data/microbatch.h"
#include "harness/data/token_source.h"
#include "harness/engine/chunk.h"
#include "harness/engine/plan.h"
#include "harness/engine/replica_check.h"  // ReplicaDriftError, which run_variant throws

namespace mtp {
namespace transport {
class Transport;
}  // namespace transport
}  // namespace mtp

namespace mtp::engine {

/// Where and how to run.
struct RunOptions {
  /// Transport ranks this process runs, each as a thread; empty = every rank. With a subset (one
  /// process per rank), `transport` must connect every process, and only the process holding
  /// rank 0 writes the record.
  std::vector<int> local_ranks;
  transport::Transport* transport = nullptr;  ///< null: an in-process transport for all ranks
  int device_index = 0;     ///< CUDA device of this process's ranks (device = cuda)
  std::string record_path;  ///< HDF5 record to write (atomically)
  /// false: no record at all (benchmarks time the step without recording); the ranks then skip
  /// the gathers that only feed it (the main grads still reach rank 0 when clipping is on).
  bool write_record = true;
  std::string scenario_name;
  std::string scenario_text;  ///< the scenario file's text, embedded in the record
  std::chrono::milliseconds recv_timeout{120000};
  uint64_t delay_seed = 0;  ///< seed of random transport delays
  /// Fault-injection seam (tests): called on every rank after its optimizer step, for each
  /// parameter copy it holds (global name, stage index, the weight), before the replica
  /// consistency check. Runs under NoGradGuard; may modify `weight` in place.
  std::function<void(int64_t step, int rank, const std::string& name, int stage,
                     at::Tensor& weight)>
      after_optimizer_step;
  /// Fault-injection seam (tests, planted bugs): called on every rank after gradient
  /// finalisation (finalize_model_grads: the data-parallel reduction and the embedding group),
  /// before the main grads are gathered, recorded, clipped and handed to the optimizer, for each
  /// parameter copy it holds (global name, stage index, its main grad, fp32 for bf16 runs).
  /// Runs under NoGradGuard; may modify `main_grad` in place.
  std::function<void(int64_t step, int rank, const std::string& name, int stage,
                     at::Tensor& main_grad)>
      after_grad_finalization;
  /// Where the microbatches come from; null: cut from the `data` given to run_variant (the
  /// scenario's). Replay serves a record's batches here (engine/recorded_batches.h).
  std::shared_ptr<const data::MicrobatchSource> batches;
  /// The dtype the record stores the losses in; default the training dtype. Replay stores them
  /// as the replayed record does, so that they compare.
  std::optional<config::DType> loss_dtype;
  /// Progress: called on the recording rank after each step (step, last step, seconds since the
  /// run started). Must not throw.
  std::function<void(int64_t step, int64_t steps, double seconds)> on_step;
};

/// Summary of a finished run.
struct RunResult {
  RunPlan plan;
  std::string record_path;
  double wall_seconds = 0.0;
  std::vector<double> total_loss;      ///< per step (on the process that records)
  std::vector<std::string> chunk_map;  ///< "stage i (pp p, vpp v): describe()" per stage
};

/// Runs `plan` with `impl` on `data` (or options.batches) and writes the record to
/// options.record_path atomically. The run starts as load_start_state(plan) says
/// (engine/checkpoint.h): from the seed's weights, a record's weights (training.init_from), or a
/// record's weights and optimizer state (training.resume_from: steps STEP + 1 … steps; the record
/// holds step STEP's weights, and its optimizer state with save_optimizer_state, then the later
/// steps). With training.save_optimizer_state every step's optimizer state is recorded.
/// Throws InputError for bad input found while running (data, records), InfraError for transport
/// timeouts and I/O (TransportAborted only when nothing else failed), InternalError for harness
/// bugs.
RunResult run_variant(const RunPlan& plan, const Implementation& impl, const data::DataConfig& data,
                      const RunOptions& options);

}  // namespace mtp::engine
