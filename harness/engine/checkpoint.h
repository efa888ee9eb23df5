// File: harness/engine/checkpoint.h
//
// Where a run starts (issue 10 items 2 and 4). Its initial weights are drawn from the seed
// (make_initial_weights), or taken by name from a step of a record ([training] init_from,
// --init-from: weights_import.h); a resumed run (--resume REC.h5:STEP) takes the weights and the
// optimizer state of that step and trains steps STEP + 1 … steps.
//
// The optimizer state is kept in the record itself, as the opt-in group "optimizer" of every step
// ([training] save_optimizer_state, --save-optimizer-state; record.h record_groups()):
//   /steps/NNNNNN/optimizer/step                  float64 scalar: Adam updates done (= NNNNNN),
//                                                 torch.optim's state["step"]
//   /steps/NNNNNN/optimizer/<param>.exp_avg       Adam's first moment, the parameter's shape
//   /steps/NNNNNN/optimizer/<param>.exp_avg_sq    Adam's second moment
// in the training dtype, names in canonical order (all exp_avg, then all exp_avg_sq), for the
// recorded copy of every parameter (owner stage, data-parallel rank 0) and unsharded (the
// distributed optimizer's shards gathered). Every other copy that the optimizer updates — a
// data-parallel replica, a word-embedding copy with embedding_copy_update = "replicated" — gets
// the same summed grad every step and so the same state (the replica check compares their
// weights after every step); on resume each is given the recorded copy's state. Step 0 has no
// optimizer group: the state before the first step is zero.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/engine/chunk.h"
#include "harness/engine/plan.h"
#include "harness/record/record.h"

namespace mtp::engine {

// The optimizer group's names (record::Group::kOptimizer, kOptimizerStepName, exp_avg_name,
// exp_avg_sq_name) live in harness/record/schema.h, which scenarios read too.
using record::exp_avg_name;
using record::exp_avg_sq_name;
using record::kOptimizerStepName;

/// Adam's state of every parameter of a model at one step (canonical order, CPU tensors of the
/// training dtype, each of its parameter's shape).
struct OptimizerCheckpoint {
  int64_t step = 0;  ///< Adam updates done: the exponent of the next step's bias corrections − 1
  std::vector<std::string> names;
  std::vector<at::Tensor> exp_avg, exp_avg_sq;
  /// Position of `name`; throws InternalError when absent.
  size_t index_of(const std::string& name) const;
};

/// Reads /steps/<step>/optimizer of `rec` for the parameters of `cfg`. Throws RecordError naming
/// the record, the object path and the tensor when the group is absent (the record was made
/// without save_optimizer_state), a name is missing or extra, a shape differs, a moment's dtype is
/// not `dtype` (resuming must not round), or the step count is not `step`.
OptimizerCheckpoint read_optimizer_state(const record::RecordReader& rec, int step,
                                         const config::ModelConfig& cfg, at::ScalarType dtype);

/// The record a run's weights came from.
struct RecordOrigin {
  std::string path;
  int64_t step = 0;
  std::string sha256;  ///< lower-case hex SHA-256 of the record file
};

/// What a run starts from.
struct StartState {
  InitialWeights weights;  ///< float64 values (exact for float32 / float64 records)
  int64_t step = 0;        ///< the step `weights` are of: the run trains step + 1 … steps
  std::optional<OptimizerCheckpoint> optimizer;  ///< resumed runs from a step > 0
  std::optional<RecordOrigin> origin;            ///< null: weights drawn from the seed
  bool resumed = false;                          ///< from training.resume_from
  /// Root attributes of the new record saying where the weights came from: init_from,
  /// init_from_step, init_from_sha256 (or resumed_from, resumed_from_step,
  /// resumed_from_sha256); none for weights from the seed.
  record::AttrMap attrs() const;
};

/// The start of `plan`: training.resume_from (weights of that step in the training dtype and,
/// for a step > 0, its optimizer state), else training.init_from (weights of that step, any
/// floating dtype), else the seed. Throws RecordError (an InputError) naming the record, the
/// object path and the parameter (missing, extra or mis-shaped names, a missing step or group, a
/// dtype that would round), InputError when resume_from's step is not before training.steps.
StartState load_start_state(const RunPlan& plan);

}  // namespace mtp::engine
