// File: harness/model/params.h
//
// Layout-independent initial values of the parameters config::parameter_specs names.
// Initial values depend only on (seed, global name, element index): each parameter has its own
// counter-based generator (xxHash3 of the name with the seed, splitmix64 per element, Box–Muller
// in double), so every layout, implementation, LibTorch version and device starts from the same
// bits. Distributions follow Megatron's init: N(0, 0.02) for embedding, linear_qkv, linear_fc1,
// router, eh_proj and output layer; N(0, 0.02/√(2N)) for linear_proj and linear_fc2 (experts and
// shared expert alike); norms 1.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "harness/config/param_specs.h"

namespace mtp::model {

/// The initial value of `spec` as a float64 CPU tensor (exact generator output); callers cast
/// to the model dtype. Depends only on (seed, spec.name, spec.shape, spec.init_std).
at::Tensor initial_value(const config::ParamSpec& spec, uint64_t seed);

}  // namespace mtp::model
