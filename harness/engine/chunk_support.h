// File: harness/engine/chunk_support.h
//
// Helpers both implementations use to build chunks: copying initial weights into a chunk's
// ParamTable and naming the parameters of decoder layers and MTP depths.
#pragma once

#include <string>
#include <vector>

#include "harness/engine/chunk.h"
#include "harness/model/program.h"

namespace mtp::engine {

/// Adds a copy of each named initial weight to `table`, cast to `dtype`, as a leaf with
/// requires_grad, on `device`. Throws InternalError for an unknown name.
void add_initial_params(model::ParamTable& table, const InitialWeights& init,
                        const std::vector<std::string>& names, at::ScalarType dtype,
                        at::Device device);

/// Parameter names of decoder layers `layers` (global, 0-based), canonical order (dense or MoE
/// per cfg.is_moe_layer).
std::vector<std::string> decoder_param_names(const std::vector<int>& layers,
                                             const config::ModelConfig& cfg);

/// Parameter names of MTP depths 1..D, canonical order.
std::vector<std::string> mtp_param_names(const config::ModelConfig& cfg);
/// Parameter names of MTP depths `depths` (1-based), in that order.
std::vector<std::string> mtp_param_names(const config::ModelConfig& cfg,
                                         const std::vector<int>& depths);

/// The names of `names` a rank holds: all of them, or with expert parallelism (groups.ep of
/// size > 1) all but the routed experts of other EP ranks (config::routed_expert_index).
std::vector<std::string> held_param_names(std::vector<std::string> names,
                                          const model::ParallelGroups& groups);

/// "t0-2" for {0,1,2}, "t3 t5" for {3,5}, "" for none.
std::string format_layer_ranges(const std::vector<int>& layers, const char* prefix);

/// Appends the pre-processing node (model::NodeKind::kPreProcess): the word-embedding lookup of
/// mb.tokens on the first stage (table `params`[embedding]), else the received input. Megatron
/// PreProcessNode.
void add_pre_process_node(model::ChunkProgram& prog, bool first_stage,
                          const model::ParamTable& params, const config::ModelConfig& cfg,
                          const MicrobatchTensors& mb);

/// How the loss stage finds its hidden states.
enum class LossHidden {
  kMtpList,      ///< prog.mtp_hidden = [h0, h1, …] computed on this stage (MTP with the loss)
  kConcatSplit,  ///< prog.hidden = [(1+D)s, b, H] received or built here, split along dim 0
};

/// Appends the post-processing node (model::NodeKind::kPostProcess): every head and loss on one
/// code path (model::loss_stage_forward); sets prog.result = objective and the lm / mtp losses.
/// Megatron PostProcessNode. `cp`: the chunk's context-parallel group (null = CP 1).
void add_post_process_node(model::ChunkProgram& prog, const at::Tensor& head,
                           const config::ModelConfig& cfg, const MicrobatchTensors& mb,
                           LossHidden source, model::ContextParallel* cp);

/// A [s·factor, b, H] shape; with context parallelism s is this rank's s/CP.
std::vector<int64_t> hidden_shape(const config::ModelConfig& cfg, int64_t factor,
                                  const model::ContextParallel* cp);

}  // namespace mtp::engine
