// File: harness/engine/weights_import.h
//
// "Weights in by name": every initial weight of a model taken from a step of a record, under
// Megatron-LM's parameter names and layouts (fused linear_qkv in per-query-group order, fused
// linear_fc1 = [gate; up]; megatron_conventions.md), as the harness records them and as
// golden/oracle/megatron_selftest_fused.h5 holds Megatron's own. The result replaces
// make_initial_weights(cfg, seed) (chunk.h) wherever weights come from elsewhere.
#pragma once

#include <ATen/ATen.h>

#include "harness/config/model_config.h"
#include "harness/engine/chunk.h"
#include "harness/record/record.h"

namespace mtp::engine {

/// The values of /steps/<step>/weight/* of `rec` for every parameter of `cfg`
/// (config::parameter_specs order), as float64 CPU tensors (exact: float32/bf16/f16 widen without
/// rounding). Throws RecordError (an InputError) naming the record, the object path and the
/// parameter when a parameter is missing, a name is not a parameter of `cfg` (extra), a shape
/// differs from the parameter's, the dtype is not floating point, or the step or its weight
/// group is absent.
InitialWeights initial_weights_from_record(const record::RecordReader& rec, int step,
                                           const config::ModelConfig& cfg);

/// A record tensor as a CPU tensor of its own dtype and shape (a copy of its bytes).
at::Tensor tensor_from_record(const record::TensorData& t);

}  // namespace mtp::engine
