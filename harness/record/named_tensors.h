// File: harness/record/named_tensors.h
//
// Tensors taken by name from a step record, checked against the names and shapes a model
// expects: the torch-free core of "weights in by name" (engine/weights_import.h), usable for any
// group of a step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/record/record.h"

namespace mtp::record {

/// One tensor a caller expects: its global (Megatron) name and shape.
struct ExpectedTensor {
  std::string name;            ///< e.g. "decoder.layers.0.self_attention.linear_qkv.weight"
  std::vector<int64_t> shape;  ///< empty for a scalar
};

/// Reads /steps/<step>/<group>/<name> for every entry of `expected`, returned in that order,
/// after checking that the group holds exactly those names with those shapes and a floating
/// dtype (float32, float64, bfloat16, float16). Throws RecordError naming the record, the
/// object path and the parameter: the step or group is absent; a name is missing (all missing
/// names are listed); a name is extra (not a parameter of the model); a shape differs (both
/// shapes given); the dtype is not floating point.
std::vector<TensorData> read_named_tensors(const RecordReader& rec, int step, Group group,
                                           const std::vector<ExpectedTensor>& expected);

}  // namespace mtp::record
