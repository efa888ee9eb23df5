// The side stream of the expert all-to-alls (side_stream.h) over c10's CUDA streams and events.
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <mutex>
#include <optional>

#include "harness/common/error.h"
#include "harness/gpu/side_stream.h"

namespace mtp::gpu {
namespace {

/// The side stream of CUDA device `device`: one per device and process, made on first use from
/// LibTorch's pool (its streams do not synchronise with the legacy default stream).
c10::cuda::CUDAStream side_stream_of(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = streams.find(device);
  if (it == streams.end()) {
    it = streams.emplace(device, c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device))
             .first;
  }
  return it->second;
}

/// The fence a Scope on this thread has already made the side stream wait for (null: none).
thread_local const at::cuda::CUDAEvent* t_fence = nullptr;

}  // namespace

struct SideStreamFence::Impl {
  c10::DeviceIndex device = 0;
  at::cuda::CUDAEvent ready;
};

SideStreamFence::SideStreamFence(const at::Device& device) {
  if (!device.is_cuda()) return;
  impl_ = std::make_unique<Impl>();
  impl_->device = device.has_index() ? device.index() : c10::cuda::current_device();
  impl_->ready.record(c10::cuda::getCurrentCUDAStream(impl_->device));
}

SideStreamFence::~SideStreamFence() = default;

struct SideStreamFence::Scope::Impl {
  const at::cuda::CUDAEvent* previous_fence = nullptr;
  std::optional<c10::cuda::CUDAStreamGuard> current;
};

SideStreamFence::Scope::Scope(const SideStreamFence& fence, bool side_stream_current) {
  if (!fence.impl_) return;
  impl_ = std::make_unique<Impl>();
  const c10::cuda::CUDAStream side = side_stream_of(fence.impl_->device);
  fence.impl_->ready.block(side);
  impl_->previous_fence = t_fence;
  t_fence = &fence.impl_->ready;
  if (side_stream_current) impl_->current.emplace(side);
}

SideStreamFence::Scope::~Scope() {
  if (impl_) t_fence = impl_->previous_fence;
}

at::Tensor on_side_stream(const at::Device& device, const std::function<at::Tensor()>& work) {
  if (!device.is_cuda()) return work();
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  const c10::cuda::CUDAGuard device_guard(index);
  const c10::cuda::CUDAStream side = side_stream_of(index);
  const c10::cuda::CUDAStream entry = c10::cuda::getCurrentCUDAStream(index);
  if (entry != side && t_fence == nullptr) {
    at::cuda::CUDAEvent issued;  // everything the thread's current stream has so far
    issued.record(entry);
    issued.block(side);
  }
  at::Tensor out;
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    out = work();
  }
  side.synchronize();
  if (out.defined() && out.is_cuda()) {
    const c10::cuda::CUDAStream compute = c10::cuda::getDefaultCUDAStream(index);
    out.record_stream(compute.unwrap());
    if (entry != side && entry != compute) out.record_stream(entry.unwrap());
  }
  return out;
}

at::Tensor side_copy(const at::Tensor& t, const at::Device& to) {
  if (to.is_cpu() ? t.is_cpu() : t.device() == to) return t;  // "cpu" and "cpu:0" alike
  if (to.is_cpu()) {
    MTP_INTERNAL_ASSERT(t.is_cuda(), "side_copy: from a CUDA tensor to the CPU");
    at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
    host.copy_(t, /*non_blocking=*/true);
    return host;
  }
  MTP_INTERNAL_ASSERT(to.is_cuda() && t.is_cpu(), "side_copy: from the CPU to a CUDA device");
  const at::Tensor pinned = t.is_pinned() ? t : t.contiguous().pin_memory();
  // From the side stream's pool: memory of the compute stream's pool could still be read by
  // compute queued after the fence, which the side stream does not wait for.
  return pinned.to(to, /*non_blocking=*/true);
}

}  // namespace mtp::gpu
