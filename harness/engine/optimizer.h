// File: harness/engine/optimizer.h
//
// Adam with decoupled weight decay (Megatron-LM's default optimizer, torch.optim.AdamW
// arithmetic), applied to the main grads finalize_model_grads left: per parameter tensor, or
// sharded over the data-parallel ranks as Megatron's DistributedOptimizer does
// (megatron/core/optimizer/distrib_optimizer.py: each rank updates its shard of every bucket of
// the chunk's buffer, then the parameters are all-gathered, param_and_grad_buffer.py
// start_param_sync). One function holds the per-element arithmetic, so both give the same bits
// for the same element.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "harness/collectives/collectives.h"
#include "harness/engine/local_model.h"
#include "harness/engine/placement.h"
#include "harness/engine/plan.h"
#include "harness/engine/topology.h"

namespace mtp::engine {

/// Adam's hyperparameters (TrainingConfig: lr, adam_beta1/2, adam_eps, weight_decay).
struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.0;
  /// false only for the planted bug kAdamBiasCorrectionOff (config/fault.h).
  bool bias_correction = true;
  static AdamHyper from(const config::TrainingConfig& t);
};

/// One Adam update of step `step` (≥ 1), in place, elementwise on tensors of one shape and dtype:
///   m ← β1·m + (1−β1)·g;   v ← β2·v + (1−β2)·g²;
///   u ← (m / (1−β1^step)) / (√(v / (1−β2^step)) + ε) [+ wd·w];   w ← w − lr·u.
/// Each element's result depends only on that element's inputs (no reduction), so updating a
/// tensor in slices gives the bits of updating it whole (a test checks this on CPU).
/// Must run under NoGradGuard when `w` is a leaf that requires grad.
void adam_update(at::Tensor& w, const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                 int64_t step, const AdamHyper& hyper);

/// Adam's moments of one local parameter copy, whole (not sharded), of its weight's shape.
struct AdamState {
  at::Tensor exp_avg, exp_avg_sq;
};

/// A rank's optimizer over the parameters of its LocalModel. With fp32 master weights (bf16
/// parameters) Adam updates the masters and each parameter is re-cast from its master
/// (Megatron's _copy_main_params_to_model_params: round to nearest bf16).
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Updates the parameters from their (finalised, clipped) main grads. Collective over the
  /// data-parallel group for the distributed optimizer.
  virtual void step(int64_t step) = 0;
  /// Collective over the data-parallel group: afterwards master() is complete on data-parallel
  /// rank 0 (the distributed optimizer gathers the other ranks' master shards there).
  virtual void gather_masters_to_first_rank() {}
  /// The master weight of `p` (p.master, or p.weight when it is its own master); with the
  /// distributed optimizer complete only on data-parallel rank 0 after
  /// gather_masters_to_first_rank().
  virtual at::Tensor master(const LocalParam& p) const;
  /// The state of every LocalModel::params entry (copies; zeros for a copy it does not update).
  /// The distributed optimizer all-gathers each bucket's shards over the data-parallel group
  /// (a collective: every data-parallel rank calls it).
  virtual std::vector<AdamState> state() = 0;
  /// Sets the state of every copy it updates from `state` (per LocalModel::params entry, whole
  /// tensors of the state's dtype and device; exact copies). The distributed optimizer keeps this
  /// rank's shard of each bucket (Megatron's scatter of a loaded state dict: each rank takes its
  /// own part, no communication). Copies it does not update keep zero state.
  virtual void load_state(const std::vector<AdamState>& state) = 0;
};

/// Which local parameter copies the optimizer updates: every one (EmbeddingCopyUpdate::
/// kReplicated, Megatron: each copy has its own state and the same summed grad), or all but the
/// non-owner word-embedding copies (kBroadcast: those are overwritten by
/// broadcast_embedding_copies afterwards).
using UpdatePredicate = std::function<bool(const LocalParam&)>;
UpdatePredicate update_predicate(config::EmbeddingCopyUpdate mode);

/// The plan's optimizer for `model` (Adam or DistributedAdam). Throws InternalError if the
/// model's buffers were not laid out for it.
std::unique_ptr<Optimizer> make_optimizer(const RunPlan& plan, LocalModel& model,
                                          const Topology& topology, int rank,
                                          collectives::Communicator& comm);

/// EmbeddingCopyUpdate::kBroadcast: the first stage's updated word-embedding table is broadcast
/// over the embedding group of every data-parallel rank, overwriting the other copies.
void broadcast_embedding_copies(LocalModel& model, const ParamPlacement& placement,
                                const Topology& topology, int rank,
                                collectives::Communicator& comm);

}  // namespace mtp::engine
