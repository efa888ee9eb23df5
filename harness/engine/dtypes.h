// The tensor types a run's config::DType stands for: one place for the mapping.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

#include "harness/config/enums.h"
#include "harness/record/tensor_data.h"

namespace mtp::engine {

/// The parameters' and activations' type of `d`: kFloat, kDouble or kBFloat16.
at::ScalarType scalar_type(config::DType d);

/// Main grads, master weights, the loss mask and the losses: fp32 for bf16 parameters (Megatron
/// --bf16 with fp32 main grads and the distributed optimizer's fp32 main params), else the
/// parameters' own type.
at::ScalarType main_type(config::DType d);

/// The record's dtype of tensor type `t`: kF32, kF64, kBF16, kF16, kI32, kI64 or kU8. Throws
/// InternalError naming `what` for any other type.
record::DType record_dtype(at::ScalarType t, const std::string& what = "a tensor");

}  // namespace mtp::engine
