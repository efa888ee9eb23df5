// File: harness/model/fan_out.h
//
// A tensor read by several consumers whose gradients are summed in a fixed order. Autograd adds
// the gradients of a tensor's consumers in the order they arrive; on one thread that order is
// fixed by the engine, but when a consumer's backward runs on another thread (an expert- or
// context-parallel collective hops to the rank's own thread so that it never blocks the one
// autograd thread all rank threads share for a CUDA device) the order depends on timing, and with
// three or more consumers (a + b) + c ≠ (a + c) + b. fan_out hands each consumer its own alias
// and sums their gradients in slot order, whichever thread finishes first.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace mtp::model {

/// `uses` aliases of `x` (same storage, shape and dtype; any device). Backward: the gradient of
/// `x` is ((g_0 + g_1) + g_2) + … over the slots whose consumer produced a gradient (a slot left
/// unused contributes nothing; all unused: no gradient). Do not modify an alias in place.
/// Throws mtp::InternalError for uses < 1.
std::vector<at::Tensor> fan_out(const at::Tensor& x, int uses);

}  // namespace mtp::model
