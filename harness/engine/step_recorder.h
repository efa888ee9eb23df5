// File: harness/engine/step_recorder.h
//
// Writes a variant's HDF5 step record (harness/record, architecture.md §6) from tensors: the
// root attributes (hyperparameters under Megatron-LM's names, the variant, the environment
// fingerprint), then per step the batch, the losses, the main grads and the weights. It turns
// LibTorch tensors into record::TensorData and averages the losses; gathering tensors from other
// ranks is the trainer's job.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/data/microbatch.h"
#include "harness/engine/plan.h"
#include "harness/record/record.h"

namespace mtp::engine {

/// `t` (any device; float32/float64/bfloat16/int32/int64/uint8) as record bytes under `name`. Throws
/// InternalError for another dtype.
record::TensorData to_record(const std::string& name, const at::Tensor& t);

/// What the record says about where and how the variant ran.
struct RecordContext {
  std::string scenario_name;
  std::string implementation;           ///< "reference" | "candidate"
  std::string execution;                ///< "4 rank thread(s) in one process", …
  int device_index = 0;                 ///< CUDA device of the recording rank
  std::vector<std::string> chunk_map;   ///< "stage i (pp p, vpp v): …" per stage
  /// Where the initial weights came from (engine/checkpoint.h StartState::attrs()).
  record::AttrMap start_attrs;
  /// The dtype the losses are stored in; default the training dtype.
  std::optional<config::DType> loss_dtype;
};

class StepRecorder {
 public:
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
  /// /steps/NNNNNN/<group>/<name> (group "grad", "weight", "model_weight" or "optimizer"; step 0 =
  /// initial
  /// weights).
  void write_tensor(int64_t step, const std::string& group, const std::string& name,
                    const at::Tensor& t);
  /// An attribute of /steps/NNNNNN (grad_norm, clip_coeff).
  void set_step_attr(int64_t step, const std::string& key, double value);
  /// Closes and renames the record to its final path (RecordError on failure).
  void commit();

 private:
  const RunPlan& plan_;
  at::ScalarType loss_dtype_;
  std::unique_ptr<record::RecordWriter> writer_;
};

}  // namespace mtp::engine
