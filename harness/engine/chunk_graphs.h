// File: harness/engine/chunk_graphs.h
//
// CUDA graphs for pipelined schedules (P > 1 or V > 1, ranks as threads or processes): each
// model chunk's forward and backward are captured as two CUDA graphs per in-flight microbatch
// slot (gpu/cuda_graph.h) and replayed for every later microbatch that takes the slot. A slot is
// the room of one microbatch between its forward and its backward: the forward graph's memory
// pool holds its saved activations, the backward graph is captured into that pool, and a slot is
// free again once its backward ran. 1F1B keeps at most P − p microbatches of a chunk in flight
// (more for interleaved), so a chunk has that many slots, taken lowest free first. What PyTorch's
// make_graphed_callables does for a module (a forward graph and a backward graph sharing one
// memory pool), here once per slot.
//
// The receives and sends stay outside the graphs: the received activation (or output gradient)
// is copied into the slot's static input before a replay, and the outputs (the activation to
// send, the input gradient, the loss stage's losses) are copied out after it.
//
// Bitwise: a replay launches the captured kernels with the captured arguments on the same
// addresses, so every value is the eager run's (harness/engine/chunk_graphs_test.cc and
// scenarios/gpu_flash.toml check records bitwise). Warm-up: a chunk's microbatches run eagerly on
// the chunk's graph stream until its first backward has run (cuBLAS handles, workspaces and
// flash attention's lazy state created outside any capture); later ones are captured into a new
// slot or replayed in a free one.
//
// Preconditions (engine/plan.cc refuses a variant that breaks them, naming the rule): those of
// engine/microbatch_graph.h but the one stage, and a plain schedule (combined 1F1B runs two
// microbatches' nodes interleaved, not a chunk's forward or backward as one call). Captures are
// thread-scoped: each pipeline rank's thread captures its own chunks while the others go on.
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

/// ChunkGraphs: the forward and backward graphs of one model chunk (one stage), slot by slot, kept
/// across steps (the chunk's parameters and main grads must keep their storage). Used by the
/// thread of the pipeline rank holding the stage only.
class ChunkGraphs {
 public:
  /// `device`: the CUDA device of the chunk. Throws InputError in a build without CUDA.
  explicit ChunkGraphs(const at::Device& device);
  ~ChunkGraphs();
  ChunkGraphs(const ChunkGraphs&) = delete;
  ChunkGraphs& operator=(const ChunkGraphs&) = delete;

  /// A forward's microbatch waiting for its backward: the slot whose graphs hold it, or the
  /// eager program of a warm-up microbatch.
  struct InFlight {
    int slot = -1;
    std::unique_ptr<model::ChunkProgram> eager;
  };
  /// A forward's outputs, copies safe to keep across later replays: result (the activation to
  /// send, [s, b, h] in the model dtype) on every stage but the loss stage; there lm and mtp
  /// (0-dim device tensors, lm then mtp_k for k = 1..D) instead.
  struct Forward {
    at::Tensor result;
    at::Tensor lm;
    std::vector<at::Tensor> mtp;
    InFlight in_flight;
  };

  /// The forward of `mb` through `chunk`: `input` is the received activation (shape
  /// chunk.input_shape(), no grad needed), undefined on stage 0. `chunk` must stay the same
  /// object and every mb must have the first's shapes. Throws InternalError on another chunk or
  /// shape, InfraError when CUDA refuses a capture.
  Forward forward(const ModelChunk& chunk, const at::Tensor& input, const MicrobatchTensors& mb);

  /// The backward of the microbatch `in_flight` came from (first in, first out is the caller's
  /// order), from `grad` (the received output gradient, shape chunk.output_shape(); undefined on
  /// the loss stage), then after_backward() (the main-grad accumulation; it must do the same
  /// work on the same tensors every call). Returns a copy of the input gradient ([s, b, h]), or
  /// undefined on stage 0. Throws as forward().
  at::Tensor backward(InFlight in_flight, const at::Tensor& grad,
                      const std::function<void()>& after_backward);

  /// Forwards run eagerly, captured and replayed (each capture is replayed once too), and the
  /// slots made (tests and benchmarks).
  struct Counts {
    int eager = 0, captured = 0, replayed = 0, slots = 0;
  };
  Counts counts() const;

 private:
  struct Slot;
  int free_slot();  ///< the lowest free slot's index, a new slot when none is free

  std::unique_ptr<gpu::CudaGraph> stream_;  ///< never captured: its stream runs the eager warm-up
  std::vector<std::unique_ptr<Slot>> slots_;
  const ModelChunk* chunk_ = nullptr;
  bool warmed_up_ = false;  ///< an eager backward has run
  Counts counts_;
};

/// PipelineGraphs: the ChunkGraphs of every stage of a run, made on first use; stage s is used
/// by the thread of the rank holding it only.
class PipelineGraphs {
 public:
  PipelineGraphs(const at::Device& device, int num_stages);
  ~PipelineGraphs();
  /// Throws InternalError for a stage outside [0, num_stages).
  ChunkGraphs& stage(int s);
  /// Summed over the stages made.
  ChunkGraphs::Counts counts() const;

 private:
  at::Device device_;
  std::vector<std::unique_ptr<ChunkGraphs>> stages_;
};

}  // namespace mtp::engine
