// File: harness/engine/standalone_chunk.h
//
// One stage of the MTP-standalone family, shared by candidate/ (every MTP depth in one stage,
// Megatron-LM PR 5247a1f460) and candidate/split/ (depths spread over consecutive stages,
// Megatron-LM #5329): the trunk final layernorm runs with decoder layer N; a stage holding MTP
// depths a..b receives cat(h0, …, h_{a−1}) along the sequence and sends cat(h0, …, h_b) on; the
// loss stage splits [(1+D)·s, b, H] into main + D chunks and runs every head and loss on one code
// path. The implementations decide the placement only: which stages hold which parameters and the
// sequence multiple each stage sends (spec §3.4's p2p shape table).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/engine/chunk.h"

namespace mtp::engine {

/// The stage `stage` of `layout` holding parameters `param_names` (taken from `init`, in
/// `dtype` on `device`). `in_factor`/`out_factor`: the sequence multiples of the activation it
/// receives (0 for the first stage, which embeds) and sends ([factor·s, b, H]; ignored on the
/// loss stage). Its MTP depths are layout.stages[stage].mtp_depths. Throws what
/// add_initial_params throws for a missing or mis-shaped initial weight.
std::unique_ptr<ModelChunk> make_standalone_chunk(
    const layout::PipelineLayout& layout, int stage, const config::ModelConfig& cfg,
    const std::vector<std::string>& param_names, const InitialWeights& init, at::ScalarType dtype,
    at::Device device, int64_t in_factor, int64_t out_factor, const model::ParallelGroups& groups);

/// The word-embedding holders of the standalone family: stage 0, every stage holding an MTP
/// depth, and the loss stage when the output layer is tied (ascending, unique).
std::vector<int> standalone_embedding_stages(const layout::PipelineLayout& layout,
                                             const config::ModelConfig& cfg);

/// The standalone family's implementation (candidate/, candidate/split/): stages from
/// make_standalone_chunk, parameters from standalone_param_names, and the sequence multiple a
/// stage sends = 1 + the last MTP depth held up to it (1 before the first MTP stage, 1 + D from
/// the last one on). The two members differ only in `kind` and so in how their layouts read R7
/// (config::mtp_rule): every depth in one stage (candidate) or spread over stages (split).
std::unique_ptr<Implementation> make_standalone_implementation(config::Implementation kind);

/// The parameters stage `stage` holds in the standalone family: an embedding copy on every stage
/// of standalone_embedding_stages, its decoder layers, FLN with decoder layer N
/// (StagePlan::owns_final_layernorm), the MTP parameters of its own depths
/// (StagePlan::mtp_depths), the untied output layer on the loss stage; canonical order.
std::vector<std::string> standalone_param_names(const layout::PipelineLayout& layout, int stage,
                                                const config::ModelConfig& cfg);

/// "E", "(embedding copy)", "t0-2", "FLN", "m1-2", "L", then " -> [shape]" of what it sends:
/// the describe_stage line of the standalone family.
std::string describe_standalone_stage(const layout::PipelineLayout& layout, int stage,
                                      const config::ModelConfig& cfg, int64_t out_factor);

}  // namespace mtp::engine
