// CudaGraph (cuda_graph.h) over at::cuda::CUDAGraph.
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "harness/common/error.h"
#include "harness/gpu/cuda_graph.h"

namespace mtp::gpu {
namespace {
// The memory pool id's type (c10::cuda::MempoolId_t; its namespace moved between LibTorch
// versions).
using PoolId = decltype(std::declval<at::cuda::CUDAGraph&>().pool());

// A non-blocking CUDA stream of this graph (and the graphs sharing it) alone while they live
// (then reused by later graphs, acquire_stream): LibTorch's stream
// pool hands its 32 streams out round robin, so two graphs of different threads could get the
// same one and capture into each other.
struct OwnedStream {
  explicit OwnedStream(c10::DeviceIndex device) {
    const c10::cuda::CUDAGuard guard(device);
    if (cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking) != cudaSuccess) {
      (void)cudaGetLastError();
      throw InfraError(fmt::format("CUDA graph: cannot create a stream on device {}", device));
    }
  }
  ~OwnedStream() { cudaStreamDestroy(raw); }  // returns at once; pending work still completes
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t raw = nullptr;
};

// The OwnedStreams no graph uses now, by device: a new graph takes one of these before it
// creates a stream, so that a process making graphs run after run uses a bounded set of streams.
// (LibTorch keeps a cuBLAS workspace per stream a GEMM ran on, for the life of the process:
// 32 MiB per stream with CUBLAS_WORKSPACE_CONFIG=:4096:8, one more per new stream otherwise.)
struct IdleStreams {
  std::mutex mutex;
  std::map<c10::DeviceIndex, std::vector<std::unique_ptr<OwnedStream>>> idle;
};
IdleStreams& idle_streams() {
  static auto* streams = new IdleStreams;  // never destroyed: streams outlive static teardown
  return *streams;
}

// An OwnedStream of `device` that no live graph uses; back to the idle set with its last graph.
std::shared_ptr<OwnedStream> acquire_stream(c10::DeviceIndex device) {
  std::unique_ptr<OwnedStream> stream;
  {
    IdleStreams& pool = idle_streams();
    const std::lock_guard<std::mutex> lock(pool.mutex);
    auto& idle = pool.idle[device];
    if (!idle.empty()) {
      stream = std::move(idle.back());
      idle.pop_back();
    }
  }
  if (!stream) stream = std::make_unique<OwnedStream>(device);
  return std::shared_ptr<OwnedStream>(stream.release(), [device](OwnedStream* s) {
    IdleStreams& pool = idle_streams();
    const std::lock_guard<std::mutex> lock(pool.mutex);
    pool.idle[device].emplace_back(s);
  });
}

// Guards LibTorch's shared CUDA graph state: at::cuda::CUDAGraph registers itself with the
// default CUDA generator's state at capture_begin and unregisters in its destructor, in a set
// without a lock of its own (LibTorch 2.11 crashed with "The graph should be registered to the
// state" when two rank threads' graphs were destroyed at once), and capture_begin/capture_end
// reset and read that state's capture offsets. The captures themselves run unlocked: the graphs
// of this harness draw no random numbers (no dropout), so the shared offsets stay 0 whatever
// the interleaving.
std::mutex& graph_state_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

struct CudaGraph::Impl {
  Impl(int d, CaptureScope s)
      : device(static_cast<c10::DeviceIndex>(d)),
        owned(acquire_stream(device)),
        stream(c10::cuda::getStreamFromExternal(owned->raw, device)),
        scope(s) {}
  Impl(const Impl& other, std::optional<PoolId> p)
      : device(other.device),
        owned(other.owned),
        stream(other.stream),
        scope(other.scope),
        pool(p) {}
  c10::DeviceIndex device;
  std::shared_ptr<OwnedStream> owned;  ///< alive while a graph on it is
  c10::cuda::CUDAStream stream;
  CaptureScope scope;
  std::optional<PoolId> pool;  ///< another graph's pool to capture into
  std::unique_ptr<at::cuda::CUDAGraph> graph = std::make_unique<at::cuda::CUDAGraph>();
  bool captured = false;

  ~Impl() {
    const std::lock_guard<std::mutex> lock(graph_state_mutex());
    graph.reset();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void capture_begin() {
    const PoolId id = pool ? *pool : PoolId{0, 0};
    const std::lock_guard<std::mutex> lock(graph_state_mutex());
#if TORCH_VERSION_MAJOR >= 2
    graph->capture_begin(id, scope == CaptureScope::kThread ? cudaStreamCaptureModeThreadLocal
                                                            : cudaStreamCaptureModeGlobal);
#else
    // LibTorch 1.13 (the CPU build's compile check only): global mode, the one it has.
    graph->capture_begin(id);
#endif
  }

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

CudaGraph::CudaGraph(int device, CaptureScope scope)
    : impl_(std::make_unique<Impl>(device, scope)) {}

CudaGraph::CudaGraph(const CudaGraph& other, bool share_pool) {
  MTP_INTERNAL_ASSERT(!share_pool || other.impl_->captured,
                      "a CudaGraph shares the pool of a graph not captured yet");
  impl_ = std::make_unique<Impl>(
      *other.impl_, share_pool ? std::optional<PoolId>(other.impl_->graph->pool()) : std::nullopt);
}
CudaGraph::~CudaGraph() = default;

void CudaGraph::run_eagerly(const std::function<void()>& work) { impl_->on_stream(work); }

void CudaGraph::capture(const std::function<void()>& work) {
  MTP_INTERNAL_ASSERT(!impl_->captured, "CudaGraph::capture called twice");
  impl_->on_stream([&] {
    impl_->capture_begin();
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
      const std::lock_guard<std::mutex> lock(graph_state_mutex());
      impl_->graph->capture_end();
    } catch (const std::exception& e) {
      throw InfraError(fmt::format("CUDA graph capture failed: {}", e.what()));
    }
  });
  impl_->captured = true;
}

void CudaGraph::replay() {
  MTP_INTERNAL_ASSERT(impl_->captured, "CudaGraph::replay before capture");
  impl_->on_stream([&] { impl_->graph->replay(); });
}

bool CudaGraph::captured() const { return impl_->captured; }

}  // namespace mtp::gpu
