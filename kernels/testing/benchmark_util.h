// File: kernels/testing/benchmark_util.h
//
// What the benchmark programs share: the device axis (CPU always, CUDA when LibTorch has it and a
// GPU is visible), a host-clock timer that waits for queued device work, and the run context
// printed in every report header. Header-only; ATen and c10 only (no CUDA headers, no direct CUDA
// runtime calls), so that it builds against CPU-only LibTorch 1.13 and CUDA LibTorch 2.x alike.
//
// Example:
//   const at::Device device = bench_device(Dev::kCuda);  // after checking device_unavailable()
//   DeviceTimer timer(device);
//   timer.Start();
//   for (int i = 0; i < reps; ++i) op();
//   state.SetIterationTime(timer.Stop() / reps);   // with ->UseManualTime()
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <chrono>
#include <optional>
#include <string>

#include "kernels/device_sync.h"

namespace mtp::bench {

/// Dev: where a benchmark runs. Part of every benchmark name ("cpu" / "cuda").
enum class Dev { kCpu, kCuda };

/// dev_name: "cpu" or "cuda".
inline const char* dev_name(Dev d) { return d == Dev::kCpu ? "cpu" : "cuda"; }

/// device_unavailable: why `d` cannot run here (LibTorch without CUDA or no GPU), or nullopt.
inline std::optional<std::string> device_unavailable(Dev d) {
  if (d == Dev::kCuda && !at::hasCUDA()) return std::string("no CUDA device");
  return std::nullopt;
}

/// bench_device: device 0 of `d`.
inline at::Device bench_device(Dev d) {
  return d == Dev::kCpu ? at::Device(at::kCPU) : at::Device(at::kCUDA, 0);
}

using mtp::kernels::device_sync;  // kernels/device_sync.h

/// DeviceTimer: wall-clock seconds of device work between Start() and Stop(), both of which wait
/// for queued work (device_sync). Use with ->UseManualTime() and state.SetIterationTime().
class DeviceTimer {
 public:
  explicit DeviceTimer(const at::Device& device)
      : flag_(at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device))) {}

  /// Start: waits for queued work, then reads the clock.
  void Start() {
    device_sync(flag_);
    t0_ = std::chrono::steady_clock::now();
  }

  /// Stop: waits for queued work, then returns seconds since Start().
  double Stop() {
    device_sync(flag_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

  /// Sync: waits for queued work (device_sync).
  void Sync() { device_sync(flag_); }

 private:
  at::Tensor flag_;
  std::chrono::steady_clock::time_point t0_;
};

/// add_run_context: LibTorch version, CUDA availability and the intra-op thread count as
/// key/value pairs of the report header (and of the JSON "context").
inline void add_run_context() {
  benchmark::AddCustomContext("torch_version", TORCH_VERSION);
  benchmark::AddCustomContext("cuda_available", at::hasCUDA() ? "true" : "false");
  benchmark::AddCustomContext("intra_op_threads", std::to_string(at::get_num_threads()));
}

}  // namespace mtp::bench
