// File: harness/engine/chunk.h
//
// The interface between the engine and an implementation: a model chunk is what one pipeline
// rank holds for one virtual stage, and an Implementation turns a validated layout into chunks.
// reference/ (MTP with the loss) and candidate/ (MTP standalone) implement it.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "harness/config/enums.h"
#include "harness/config/model_config.h"
#include "harness/layout/layout.h"
#include "harness/model/context_parallel.h"
#include "harness/model/layers.h"
#include "harness/model/param_table.h"
#include "harness/model/params.h"
#include "harness/model/program.h"

namespace mtp::engine {

/// One microbatch as tensors, [b, s] each; identical on every stage that reads it.
struct MicrobatchTensors {
  at::Tensor tokens;             ///< int64
  at::Tensor labels;             ///< int64
  at::Tensor loss_mask;          ///< model dtype, 0/1
  int64_t num_microbatches = 1;  ///< M of the step (the loss is divided by it)
  /// calculate_per_token_loss: the step's token counts [N_0, N_1 .. N_D] (main mask, then each
  /// depth's rolled mask) over the global batch; empty otherwise (model/loss.h LossInputs).
  std::vector<double> token_counts{};
  std::vector<double> mtp_ratio_counts{};  ///< model/loss.h LossInputs (the #7452 fault only)
  /// Context parallel: [N_0 .. N_D] of this microbatch over the whole sequence (model/loss.h
  /// LossInputs::sequence_token_counts); empty with CP = 1. tokens, labels and loss_mask then
  /// hold this CP rank's s/CP positions of every row (model/context_parallel.h).
  std::vector<double> sequence_token_counts{};
};

/// What a chunk's forward produced.
struct ChunkOutput {
  at::Tensor
      activation;        ///< sent downstream ([s,b,H] or [(1+D)s,b,H]); undefined on the loss stage
  at::Tensor objective;  ///< loss stage only: the scalar to call backward() on
  double lm = 0.0;       ///< loss stage only: this microbatch's lm loss
  std::vector<double> mtp;  ///< loss stage only: this microbatch's mtp_k losses (unscaled)
};

/// The modules of one (pipeline rank, virtual stage).
class ModelChunk {
 public:
  virtual ~ModelChunk() = default;
  /// The layout's plan of this chunk.
  virtual const layout::StagePlan& plan() const = 0;
  /// Parameters (leaf tensors, requires_grad) by global name, canonical order. A shared
  /// parameter's copy has the owner's name (e.g. the MTP stage's embedding copy).
  virtual const model::ParamTable& params() const = 0;
  /// The forward of one microbatch as a node program (harness/model/program.h); nothing runs
  /// yet. `input` is the received activation with requires_grad (shape input_shape()), undefined
  /// on stage 0. `split`: cut the autograd graph between nodes (combined 1F1B). The loss stage's
  /// program sets result = objective and the lm / mtp losses; every other stage's result is the
  /// activation to send.
  virtual std::unique_ptr<model::ChunkProgram> program(const at::Tensor& input,
                                                       const MicrobatchTensors& mb,
                                                       bool split) const = 0;
  /// Runs program(input, mb, false) to the end (plain schedules and tests).
  ChunkOutput forward(const at::Tensor& input, const MicrobatchTensors& mb) const;
  /// Static p2p shape of the activation this chunk receives (empty on stage 0).
  virtual std::vector<int64_t> input_shape() const = 0;
  /// Static p2p shape of the activation this chunk sends (empty on the loss stage).
  virtual std::vector<int64_t> output_shape() const = 0;
};

/// Initial values of every parameter by global name (float64, exact generator output).
struct InitialWeights {
  std::vector<config::ParamSpec> specs;  ///< canonical order
  std::vector<at::Tensor> values;        ///< same order, float64
  /// The value of `name`; throws InternalError when absent.
  const at::Tensor& get(const std::string& name) const;
};

/// Builds InitialWeights for `cfg` from `seed` (model/params.h).
InitialWeights make_initial_weights(const config::ModelConfig& cfg, uint64_t seed);

/// An implementation of MTP placement: which parameters each stage holds and how a layout
/// becomes chunks. reference/ and candidate/ implement it; the engine knows nothing else of them.
class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual config::Implementation kind() const = 0;
  /// "reference" or "candidate".
  std::string name() const { return config::enum_name(kind()); }
  /// Throws InputError when this implementation cannot run `layout` (the reference rejects
  /// standalone layouts), naming the layout and the reason.
  virtual void check_layout(const layout::PipelineLayout& layout) const = 0;
  /// Global names of the parameters the chunk of stage `stage` holds, canonical order
  /// (model/params.h). A shared parameter's copy has the owner's name (the word-embedding table
  /// on the MTP stage or a tied loss stage). The chunk build_chunk() makes holds exactly these,
  /// so the engine can place every parameter without building any chunk.
  virtual std::vector<std::string> stage_param_names(const layout::PipelineLayout& layout,
                                                     int stage,
                                                     const config::ModelConfig& cfg) const = 0;
  /// One line for `--verbose` and records: what the chunk of stage `stage` holds ("E t0-2",
  /// "t7 FLN m1-2 -> [96, 2, 64]").
  virtual std::string describe_stage(const layout::PipelineLayout& layout, int stage,
                                     const config::ModelConfig& cfg) const = 0;
  /// The chunk of stage `stage` (i = v·P + p), parameters copied from `init`, cast to `dtype`,
  /// on `device`. groups.cp: this rank's context-parallel group (null = CP 1); the chunk then
  /// works on s/CP tokens per row (activations [s/CP·(1+D), b, H]) and keeps it for its
  /// collectives. groups.ep: this rank's expert-parallel group (null = EP 1); the chunk then
  /// holds only this EP rank's routed experts (held_param_names) and dispatches over it.
  virtual std::unique_ptr<ModelChunk> build_chunk(const layout::PipelineLayout& layout, int stage,
                                                  const config::ModelConfig& cfg,
                                                  const InitialWeights& init, at::ScalarType dtype,
                                                  at::Device device,
                                                  const model::ParallelGroups& groups) const = 0;

  /// Stage indices holding a copy of the word-embedding table, ascending (Megatron's embedding
  /// group, spec §3.6): derived from stage_param_names.
  std::vector<int> embedding_group(const layout::PipelineLayout& layout,
                                   const config::ModelConfig& cfg) const;
  /// One chunk per stage index (tests, benchmarks and all-ranks-in-one-thread uses).
  std::vector<std::unique_ptr<ModelChunk>> build_chunks(
      const layout::PipelineLayout& layout, const config::ModelConfig& cfg,
      const InitialWeights& init, at::ScalarType dtype,
      at::Device device = at::Device(at::kCPU)) const;
};

}  // namespace mtp::engine
