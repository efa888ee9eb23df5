// File: harness/engine/stage_main_grads.h
//
// fp32 main grads for a set of model chunks outside a full run (benchmarks, the cost
// calibration's timed runs): after each backward of a stage its bf16 .grad is added into the
// main grad and dropped, as Megatron's DDP hook does and LocalModel::accumulate_main_grads does
// in a run. CUDA graphs need it so: a chunk graph's backward must do the same work on the same
// tensors every replay (engine/chunk_graphs.h), which a .grad kept across steps would not.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

#include "harness/engine/chunk.h"

namespace mtp::engine {

class StageMainGrads {
 public:
  /// One fp32 main grad (zeros, the weight's shape, on its device) per parameter of every chunk;
  /// chunks[s] is stage s.
  explicit StageMainGrads(const std::vector<std::unique_ptr<ModelChunk>>& chunks);

  /// Adds stage `stage`'s defined .grads into their main grads (kernels::accumulate_main_grad,
  /// add_'s bits) and drops the .grads. Not differentiable. `stage` must be a chunk's index.
  void accumulate(int stage);

  /// Zeroes every main grad (a new step).
  void zero();

 private:
  std::vector<std::vector<std::pair<at::Tensor, at::Tensor>>> grads_;  ///< (weight, main)
};

}  // namespace mtp::engine
