// File: harness/engine/grad_clip.h
//
// Gradient clipping by the global norm (Megatron-LM optimizer/clip_grads.py clip_grad_norm_fp32,
// with max_norm = --clip-grad), computed so that it does not depend on the partition: the
// recording rank sums the squares of every main grad in float64 in canonical order (Megatron sums
// per-rank partial norms, spec §5), then broadcasts the coefficient to every rank.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "harness/collectives/collectives.h"
#include "harness/engine/local_model.h"
#include "harness/engine/step_recorder.h"

namespace mtp::engine {

/// Clips `model`'s main grads on every rank. `grads`: on rank 0 every main grad of the model in
/// canonical order (any dtype; read as float64), empty elsewhere. norm = sqrt(Σ g²); coefficient
/// c = min(max_norm / (norm + 1e-6), 1); every grad buffer of `model` is scaled by c when c < 1.
/// Rank 0 records grad_norm and clip_coeff as attributes of step `step` when `recorder` is not
/// null. Collective over `world` (every rank must call it); max_norm ≤ 0 (off) returns at once on
/// every rank without communicating. Returns c (1 when off). `inject` =
/// kEmbeddingNormCountedTwice plants torchtitan #4488 (config/fault.h): grads[0], the word
/// embedding (first in canonical order), adds its squares twice.
double clip_grads_by_global_norm(double max_norm, int64_t step,
                                 const std::vector<at::Tensor>& grads, LocalModel& model,
                                 collectives::Communicator& comm, const collectives::Group& world,
                                 const at::Device& device, StepRecorder* recorder,
                                 config::Fault inject = config::Fault::kNone);

}  // namespace mtp::engine
