// File: harness/engine/microbatch_graph.h
//
// CUDA graphs for a single-stage model (P = 1, one virtual stage): a microbatch's forward, loss,
// backward and main-grad accumulation are captured once as one CUDA graph (gpu/cuda_graph.h) and
// replayed for every later microbatch of every step, with the microbatch's tokens, labels and
// loss mask copied into the graph's static input tensors first. What PyTorch's
// make_graphed_callables does for a module, here for the whole microbatch: it removes the
// per-op host cost (LibTorch dispatch and kernel launch, ~10 µs per op) that bounds a small
// model's step (tiny model: ~45K ATen ops per step, GPU busy 17 of 477 ms).
//
// Bitwise: a replay launches the captured kernels with the captured arguments, so every value
// is the eager run's; the graph-vs-eager test (harness/engine/microbatch_graph_cuda_test.cc)
// and scenarios/gpu_flash.toml check records bitwise. The first microbatch of the first step
// runs eagerly on the graph's stream (warm-up: cuBLAS handles and workspaces), the second is
// captured, then replayed, and every later one is replayed.
//
// Preconditions (engine/plan.cc refuses a variant that breaks them, naming the rule): CUDA,
// one stage holding the whole model (the schedule is then F, B per microbatch), bf16 with
// per-backward main-grad accumulation (the captured backward leaves no .grad behind: each bf16
// grad is added into its fp32 main grad and dropped inside the graph, so every replay starts
// from the same state), harness kernels (LibTorch's CUDA embedding backward reads a segment
// count back to the host), no MoE (the token permutation is computed on the host). Captures are
// thread-scoped (gpu/cuda_graph.h), so data-parallel ranks as threads each capture their own.
// A pipelined layout uses engine/chunk_graphs.h instead.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <vector>

#include "harness/engine/chunk.h"

namespace mtp::gpu {
class CudaGraph;
}

namespace mtp::engine {

/// MicrobatchGraph: the captured microbatch of one single-stage model chunk, kept across steps
/// (its chunk's parameters, main grads and static inputs must keep their storage).
class MicrobatchGraph {
 public:
  /// `device`: the CUDA device of the chunk. Throws InputError in a build without CUDA.
  explicit MicrobatchGraph(const at::Device& device);
  ~MicrobatchGraph();
  MicrobatchGraph(const MicrobatchGraph&) = delete;
  MicrobatchGraph& operator=(const MicrobatchGraph&) = delete;

  /// One microbatch's losses: 0-dim device tensors of this microbatch (copies, safe to keep
  /// across replays), lm and then mtp_k for k = 1..D.
  struct Losses {
    at::Tensor lm;
    std::vector<at::Tensor> mtp;
  };

  /// Forward, loss, backward of `mb` through `chunk` (the whole model: stage 0 and the loss
  /// stage), then after_backward() (the main-grad accumulation). Eager the first time, captured
  /// and replayed the second, replayed afterwards. `chunk` must stay the same object, and
  /// `after_backward` must do the same work on the same tensors at every call (a replay repeats
  /// what it did at capture); `mb` must have the shapes of the first call's. Throws
  /// InternalError on another chunk or shape, InfraError when CUDA refuses the capture.
  Losses run(const ModelChunk& chunk, const MicrobatchTensors& mb,
             const std::function<void()>& after_backward);

  /// How many calls ran eagerly, were captured and were replays (tests and benchmarks).
  struct Counts {
    int eager = 0, captured = 0, replayed = 0;
  };
  Counts counts() const { return counts_; }

 private:
  // The microbatch's work; sets lm_ and mtp_.
  void body(const ModelChunk& chunk, const MicrobatchTensors& mb,
            const std::function<void()>& after_backward);

  std::unique_ptr<gpu::CudaGraph> graph_;
  const ModelChunk* chunk_ = nullptr;
  MicrobatchTensors static_;  ///< the graph's inputs (allocated at capture)
  at::Tensor lm_;             ///< the graph's loss outputs (in its memory pool)
  std::vector<at::Tensor> mtp_;
  Counts counts_;
};

}  // namespace mtp::engine
