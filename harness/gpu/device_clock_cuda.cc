// DeviceClock of a CUDA build (harness/gpu/device_clock.h): a pool of timing events.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <mutex>
#include <vector>

#include "harness/common/error.h"
#include "harness/gpu/device_clock.h"

namespace mtp::gpu {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw InfraError(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

}  // namespace

struct DeviceClock::Impl {
  int device = 0;
  std::mutex mu;
  std::vector<cudaEvent_t> events;  // events[0, used) are this round's marks
  size_t used = 0;
};

DeviceClock::DeviceClock(int device) : impl_(std::make_unique<Impl>()) { impl_->device = device; }

DeviceClock::~DeviceClock() {
  for (cudaEvent_t e : impl_->events) cudaEventDestroy(e);  // no throw from a destructor
}

int DeviceClock::mark() {
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(impl_->device));
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->used == impl_->events.size()) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    impl_->events.push_back(e);
  }
  const cudaStream_t stream =
      c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(impl_->device)).stream();
  check(cudaEventRecord(impl_->events[impl_->used], stream), "cudaEventRecord");
  return static_cast<int>(impl_->used++);
}

double DeviceClock::elapsed_ms(int a, int b) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto valid = [this](int i) { return i >= 0 && static_cast<size_t>(i) < impl_->used; };
  if (!valid(a) || !valid(b)) {
    throw InfraError(fmt::format("DeviceClock: marks {} and {} are not both among the {} marks", a,
                                 b, impl_->used));
  }
  check(cudaEventSynchronize(impl_->events[b]), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, impl_->events[a], impl_->events[b]), "cudaEventElapsedTime");
  return ms;
}

void DeviceClock::clear() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->used = 0;
}

}  // namespace mtp::gpu
