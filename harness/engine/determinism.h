// File: harness/engine/determinism.h
//
// Switches every determinism setting on before the first tensor op, and reports them for the
// record's fingerprint (determinism_anchors.md §2; Megatron-LM training/determinism.py).
#pragma once

#include <torch/version.h>

#include <map>
#include <string>

/// 1 where LibTorch has the deterministic fill of uninitialized memory (>= 2.1).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define MTP_TORCH_FILLS_UNINITIALIZED 1
#else
#define MTP_TORCH_FILLS_UNINITIALIZED 0
#endif

namespace mtp::engine {

/// Sets, once per process and before any tensor op: CUBLAS_WORKSPACE_CONFIG=:4096:8,
/// NCCL_ALGO=Ring, NCCL_NVLS_ENABLE=0 (each only if unset; a conflicting value already set throws
/// InputError naming the variable), deterministic algorithms on (error, not warn), cuDNN
/// deterministic and not benchmarking, TF32 off, intra-op threads 1, inter-op threads 1, and
/// (LibTorch >= 2.1) no NaN fill of new tensors (determinism.cc says why that is safe).
void apply_determinism();

/// Call at the start of every thread that runs tensor ops: intra-op thread count 1 (OpenMP's
/// thread count is per thread). Throws InternalError if the count does not stick.
void pin_thread_determinism();

/// The settings and library versions as record attributes (torch version, threads, env vars).
std::map<std::string, std::string> determinism_fingerprint();

}  // namespace mtp::engine
