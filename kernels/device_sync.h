// File: kernels/device_sync.h
//
// device_sync: wait until the device has finished every operation queued so far, for timing
// (benchmarks, `mtp-harness calibrate`).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

namespace mtp::kernels {

/// Returns once every operation queued so far on the device of `flag` has finished. On CUDA with
/// LibTorch >= 2.6 this is a device-wide synchronisation (DeviceGuardImplInterface::
/// synchronizeDevice, i.e. cudaDeviceSynchronize), which also covers work that rank or autograd
/// threads queued on other streams. Otherwise (older LibTorch, or a backend that refuses) it
/// copies the 1-element device tensor `flag` to the host: that blocking device-to-host copy is
/// ordered after all earlier work on the current stream. Either way it adds a few µs. On the CPU,
/// ATen ops are synchronous and this does nothing.
inline void device_sync(const at::Tensor& flag) {
  if (!flag.is_cuda()) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
  try {
    c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->synchronizeDevice(flag.device().index());
    return;
  } catch (const c10::Error&) {
    // Fall through to the stream-ordered copy.
  }
#endif
  (void)flag.cpu();
}

}  // namespace mtp::kernels
