// File: kernels/testing/trace_util.h
//
// A Chrome trace of one region of a benchmark, for profiling before guessing what limits a
// number: LibTorch's Kineto profiler (the one behind torch.profiler) records the CPU operators
// of the calling thread and, through CUPTI, every CUDA kernel and copy of the process (rank
// threads and autograd's device threads included). The trace is the JSON chrome://tracing and
// Perfetto read; kernels are the events with "cat": "kernel", durations in µs.
// Header-only; needs the Kineto profiler of LibTorch ≥ 2 (Debian's LibTorch 1.13 is built
// without it: start() then throws).
//
// Example:
//   mtp::bench::TraceRegion trace;                 // nothing recorded yet
//   trace.start();
//   step();
//   trace.stop_and_save("/tmp/step.trace.json");   // waits for the device first
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>

#include <set>
#include <stdexcept>
#include <string>

#include "kernels/testing/benchmark_util.h"

namespace mtp::bench {

/// TraceRegion: records CPU operators and CUDA activity between start() and stop_and_save().
/// Throws std::runtime_error where LibTorch has no Kineto profiler (LibTorch < 2) and what
/// LibTorch's profiler throws (c10::Error) otherwise.
class TraceRegion {
 public:
  /// start: prepares the profiler (CUPTI is initialised here, outside the region) and starts it.
  void start() {
#if TORCH_VERSION_MAJOR >= 2
    namespace pimpl = torch::profiler::impl;
    const pimpl::ProfilerConfig config(pimpl::ProfilerState::KINETO);
    std::set<pimpl::ActivityType> activities{pimpl::ActivityType::CPU};
    if (at::hasCUDA()) activities.insert(pimpl::ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
    active_ = true;
#else
    throw std::runtime_error("a Chrome trace needs LibTorch >= 2 (Kineto); this is " TORCH_VERSION);
#endif
  }

  /// stop_and_save: waits for the device's queued work (`flag`'s device), stops the profiler and
  /// writes the Chrome trace to `path`.
  void stop_and_save(const at::Tensor& flag, const std::string& path) {
#if TORCH_VERSION_MAJOR >= 2
    if (!active_) throw std::runtime_error("TraceRegion::stop_and_save before start");
    device_sync(flag);
    auto result = torch::autograd::profiler::disableProfiler();
    active_ = false;
    result->save(path);
#else
    (void)flag;
    (void)path;
#endif
  }

 private:
  bool active_ = false;
};

}  // namespace mtp::bench
