// CudaGraph (cuda_graph.h) over at::cuda::CUDAGraph.
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <exception>

#include "harness/common/error.h"
#include "harness/gpu/cuda_graph.h"

namespace mtp::gpu {

struct CudaGraph::Impl {
  explicit Impl(int d)
      : device(static_cast<c10::DeviceIndex>(d)),
        stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device)) {}
  c10::DeviceIndex device;
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAGraph graph;
  bool captured = false;

  // Runs `body` with the private stream current, ordered after the caller's stream and
  // before the caller's later work.
  template <typename F>
  void on_stream(F&& body) {
    const c10::cuda::CUDAGuard device_guard(device);
    const c10::cuda::CUDAStream outer = c10::cuda::getCurrentCUDAStream(device);
    at::cuda::CUDAEvent ready;
    ready.record(outer);
    ready.block(stream);
    {
      const c10::cuda::CUDAStreamGuard stream_guard(stream);
      body();
    }
    at::cuda::CUDAEvent done;
    done.record(stream);
    done.block(outer);
  }
};

CudaGraph::CudaGraph(int device) : impl_(std::make_unique<Impl>(device)) {}
CudaGraph::~CudaGraph() = default;

void CudaGraph::run_eagerly(const std::function<void()>& work) { impl_->on_stream(work); }

void CudaGraph::capture(const std::function<void()>& work) {
  MTP_INTERNAL_ASSERT(!impl_->captured, "CudaGraph::capture called twice");
  impl_->on_stream([&] {
    impl_->graph.capture_begin();
    try {
      work();
    } catch (...) {
      // End the capture so that the stream and the allocator leave capture mode; the graph is
      // discarded and the original error goes on.
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(impl_->stream.stream(), &partial) == cudaSuccess &&
          partial != nullptr) {
        cudaGraphDestroy(partial);
      }
      (void)cudaGetLastError();
      throw;
    }
    try {
      impl_->graph.capture_end();
    } catch (const std::exception& e) {
      throw InfraError(fmt::format("CUDA graph capture failed: {}", e.what()));
    }
  });
  impl_->captured = true;
}

void CudaGraph::replay() {
  MTP_INTERNAL_ASSERT(impl_->captured, "CudaGraph::replay before capture");
  impl_->on_stream([&] { impl_->graph.replay(); });
}

bool CudaGraph::captured() const { return impl_->captured; }

}  // namespace mtp::gpu
