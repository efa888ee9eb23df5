// File: harness/engine/step_recorder.h
//
// Writes a variant's HDF5 step record (harness/record, architecture.md §6) from tensors: the
// root attributes (hyperparameters under Megatron-LM's names, the variant, the environment
// fingerprint, the scenario's text), then per step the batch, the losses, the main grads and the
// weights. It averages the losses and keeps each grad, weight and optimizer tensor in full or as
// digests (config::RecordMode, step_storage in resource_estimate.h); gathering tensors from
// other ranks is the trainer's job.
//
// Recording is off the critical path: write_* take a snapshot of the tensor on its own device (a
// clone; on CUDA ordered by an event on the current stream) and return; one writer thread copies
// snapshots to the host (on CUDA on a stream of its own, so the copy overlaps the next step's
// kernels), digests them (harness/record/digest.h) and writes the HDF5 file in submission order,
// so the file is the same as a synchronous writer's. A digest-only tensor on a GPU is digested
// on the GPU instead (kernels::block_digests: the same XXH3-128 block digests, on the current
// stream): its snapshot is 16 bytes per 64 Ki elements, not the tensor. At most kMaxBytesInFlight
// of snapshots wait (write_* blocks beyond that). A write error is rethrown by the next write_* or
// by commit().
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/data/microbatch.h"
#include "harness/engine/plan.h"
#include "harness/record/record.h"

namespace mtp::engine {

/// A step's losses over the global batch: lm and mtp_1..mtp_D averaged over the K = DP·M
/// microbatches in float64 in global order (summed with calculate_per_token_loss, whose
/// per-microbatch values are shares of the global token mean), total = lm + (λ/D)·Σ mtp_k.
struct StepLossAverages {
  double lm = 0.0;
  std::vector<double> mtp;
  double total = 0.0;
};
/// The averages of per-microbatch losses lm[k], mtp[k][depth] (global microbatch order).
StepLossAverages average_losses(const RunPlan& plan, const std::vector<double>& lm,
                                const std::vector<std::vector<double>>& mtp);

/// What the record says about where and how the variant ran.
struct RecordContext {
  std::string scenario_name;
  std::string implementation;          ///< "reference" | "candidate"
  std::string execution;               ///< "4 rank thread(s) in one process", …
  int device_index = 0;                ///< CUDA device of the recording rank
  std::vector<std::string> chunk_map;  ///< "stage i (pp p, vpp v): …" per stage
  /// Where the initial weights came from (engine/checkpoint.h StartState::attrs()).
  record::AttrMap start_attrs;
  /// The dtype the losses are stored in; default the training dtype.
  std::optional<config::DType> loss_dtype;
  /// The scenario file's text (root attribute scenario_text: a record says what made it).
  std::string scenario_text;
  /// Every parameter's stages, the recorded copy's first (root attribute param_stages, JSON
  /// {"name": [stage, ...]}): which (pipeline rank, virtual stage) owns a divergent tensor.
  std::vector<std::pair<std::string, std::vector<int>>> param_stages;
  /// (pipeline rank, virtual stage) of every stage (root attribute stage_coords, JSON
  /// [[pp, vpp], ...]).
  std::vector<std::pair<int, int>> stage_coords;
};

class StepRecorder {
 public:
  /// Snapshot bytes that may wait for the writer thread before write_* blocks.
  static constexpr uint64_t kMaxBytesInFlight = uint64_t{4} << 30;

  /// Opens the record (atomically: RecordWriter) and writes the root attributes. Throws
  /// RecordError when the file cannot be created.
  StepRecorder(const std::string& path, const RunPlan& plan, const data::MicrobatchSource& source,
               const RecordContext& context);

  /// /steps/NNNNNN/batch: tokens, labels [K, b, s] int32, loss_mask [K, b, s] uint8, K = DP·M
  /// microbatches in global order (microbatch mb of data-parallel rank d at mb·DP + d).
  void write_batch(int64_t step, const at::Tensor& tokens, const at::Tensor& labels,
                   const at::Tensor& loss_mask);
  /// /steps/NNNNNN/loss from the per-microbatch losses in global order (lm[k], mtp[k][depth]):
  /// lm, mtp_1..mtp_D each averaged over the K microbatches in float64 in that order, and
  /// total = lm + (λ/D)·Σ mtp_k, all stored in the training dtype. Returns total (float64).
  double write_losses(int64_t step, const std::vector<double>& lm,
                      const std::vector<std::vector<double>>& mtp);
  /// /steps/NNNNNN/<group>/<name> (record/schema.h: the batch and loss groups are always kept in
  /// full, the others as step_storage decides; step 0 = initial weights).
  void write_tensor(int64_t step, record::Group group, const std::string& name,
                    const at::Tensor& t);
  /// write_tensor of tensors[i] under names[i], in order. A run of digest-only tensors on one
  /// GPU is summarised in one pass (kernels::block_summaries of the list: two launches per 64
  /// tensors instead of two per tensor) and handed to the writer thread as one job: the same
  /// datasets, attributes and order as write_tensor one by one. Throws InternalError when the
  /// lists differ in length.
  void write_tensors(int64_t step, record::Group group, const std::vector<std::string>& names,
                     const std::vector<at::Tensor>& tensors);
  /// An attribute of /steps/NNNNNN (grad_norm, clip_coeff).
  void set_step_attr(int64_t step, const std::string& key, double value);
  /// Waits for the writer thread, then closes and renames the record to its final path. Throws
  /// what the writer thread failed with (RecordWriteError on an I/O fault), else RecordError on
  /// failure.
  void commit();
  /// Stops the writer thread; without commit() the temporary file is removed.
  ~StepRecorder();

 private:
  struct Writer;
  /// A snapshot of t (its bytes) for the writer thread, which digests and writes it.
  void write_snapshot(int64_t step, record::Group group, const std::string& name,
                      const at::Tensor& t, record::Storage storage);
  /// Device digests of tensors [begin, end) of the lists (digest-only, on one GPU).
  void write_device_digests(int64_t step, record::Group group,
                            const std::vector<std::string>& names,
                            const std::vector<at::Tensor>& tensors, size_t begin, size_t end);
  const RunPlan& plan_;
  record::Storage default_storage_;  ///< default_step_storage(plan_)
  at::ScalarType loss_dtype_;
  std::unique_ptr<Writer> writer_;
};

}  // namespace mtp::engine
