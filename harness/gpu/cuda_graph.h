// File: harness/gpu/cuda_graph.h
//
// One CUDA graph of work that LibTorch ops issue on a private stream (at::cuda::CUDAGraph, the
// machinery under PyTorch's torch.cuda.graph / make_graphed_callables): the work is captured
// once and replayed with one launch. The harness uses it for a whole microbatch of a
// single-stage model (harness/engine/microbatch_graph.h), which the tiny model's step is made
// of: thousands of small kernels whose launches, not the GPU, set the step time; and for a
// pipelined chunk's forward and backward, one pair per in-flight microbatch slot
// (harness/engine/chunk_graphs.h), the backward captured into its forward's memory pool where
// the saved activations live.
//
// Rules of the captured work (CUDA's and LibTorch's): no host synchronisation (no .item(), no
// .cpu()), no host-side decisions on device values, tensors read from outside the graph keep
// their addresses between replays (parameters, main grads, static inputs), tensors allocated
// inside live in the graph's private memory pool and are overwritten by the next replay.
// A replay runs exactly the captured kernels with the captured arguments, so its results are
// bitwise those of the eager run it recorded (checked on the GPU by harness/engine's
// graph-vs-eager test and scenarios/gpu_flash.toml).
#pragma once

#include <functional>
#include <memory>

namespace mtp::gpu {

/// CudaGraph: a CUDA graph on CUDA device `device` and a stream of its own. Every entry point
/// orders its stream after the caller's current stream's work and the caller's stream after
/// its own, so callers see stream-ordered semantics. Not thread-safe. A graph made with
/// CaptureScope::kProcess is captured in CUDA's global mode (no other thread of the process may
/// make an unsafe CUDA call meanwhile: one capture at a time); kThread in thread-local mode
/// (other threads, e.g. other pipeline ranks' threads, go on; LibTorch's allocator keeps each
/// capture's allocations apart by stream).
class CudaGraph {
 public:
  enum class CaptureScope { kProcess, kThread };
  /// Throws InputError in a build without CUDA LibTorch.
  explicit CudaGraph(int device, CaptureScope scope = CaptureScope::kProcess);
  /// A graph on `other`'s device and stream, with its capture scope. share_pool: captures into
  /// `other`'s memory pool (a backward whose forward `other` holds: the saved activations it
  /// reads live there, and the allocator then never hands their blocks out), which needs `other`
  /// captured first and the two replayed in capture order; otherwise a pool of its own. `other`
  /// must outlive this graph. Throws InternalError when share_pool and `other` is not captured.
  CudaGraph(const CudaGraph& other, bool share_pool);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /// Runs `work` eagerly on the graph's stream (warm-up before a capture: lazy cuBLAS handles
  /// and workspaces are created on that stream outside the capture).
  void run_eagerly(const std::function<void()>& work);
  /// Captures `work` on the graph's stream; nothing runs. Throws InternalError when already
  /// captured, InfraError when CUDA refuses the capture (e.g. a host sync inside `work`); an
  /// exception from `work` ends the capture and is rethrown.
  void capture(const std::function<void()>& work);
  /// Launches the captured graph. Throws InternalError before capture().
  void replay();
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtp::gpu
