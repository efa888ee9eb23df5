// File: harness/model/layer_nodes.h
//
// Builds a chunk's ChunkProgram from the shared layers, node by node as Megatron-LM's combined
// 1F1B splits a model chunk (models/gpt/fine_grained_callables.py, spec §4.6):
//   dense layer:  attn (input norm, attention, residual) → mlp (pre-MLP norm, SwiGLU, residual)
//   MoE layer:    attn (attention, residual, pre-MLP norm, shared expert, router, permute)
//                 → dispatch (all-to-all; identity with one expert-parallel rank)
//                 → mlp (routed experts) → combine (un-permute, gates, + shared, + residual)
//   MTP depth k:  attn (roll ids, embedding, enorm/hnorm, eh_proj, then the layer's attn node)
//                 → [dispatch → mlp → combine | mlp] → mtp_post (final norm k)
// The trunk final layernorm runs inside the last decoder layer's last node (Megatron: in its
// mlp/combine callable). Values are identical to transformer_layer / mtp_block_forward; what the
// split changes is only where backward is cut (program.h).
#pragma once

#include <ATen/ATen.h>

#include "harness/config/model_config.h"
#include "harness/model/layers.h"
#include "harness/model/param_table.h"
#include "harness/model/program.h"

namespace mtp::model {

/// Appends the nodes of decoder layer `layer` (global, 0-based): prog.hidden [s, b, H] in and out.
/// When `final_norm` is defined, the layer's last node applies it afterwards (trunk FLN).
/// `params`, `cfg` and `rope` must outlive the program.
void append_decoder_layer_nodes(ChunkProgram& prog, int layer, const ParamTable& params,
                                const config::ModelConfig& cfg, const RopeTables& rope,
                                const at::Tensor& final_norm);

/// Appends the nodes of MTP depths 1..D. The first depth takes h0 = prog.hidden (the trunk
/// output after the final norm) and starts prog.mtp_hidden = [h0]; depth k appends h_k. With
/// `concat`, the last node sets prog.hidden = cat(h0, …, hD) along dim 0 ([(1+D)s, b, H], the
/// standalone stage's output); otherwise prog.hidden = hD. tokens [b, s] int64; `table` is this
/// chunk's embedding copy [V, H].
void append_mtp_nodes(ChunkProgram& prog, const at::Tensor& tokens, const at::Tensor& table,
                      const ParamTable& params, const config::ModelConfig& cfg,
                      const RopeTables& rope, bool concat);

/// Depths `depths` (1-based, consecutive, ascending; candidate/split/'s stage of them) when the
/// stage receives the earlier depths' outputs: for a first depth a > 1 the input prog.hidden is
/// cat(h0, …, h_{a−1}) [a·s, b, H], split into prog.mtp_hidden, and the token ids are rolled
/// a − 1 times before depth a rolls them once more. The last node sets prog.hidden =
/// cat(h0, …, h_last) ([(1 + last)·s, b, H]). For depths = 1..D this is the concat form above.
void append_mtp_depth_nodes(ChunkProgram& prog, const at::Tensor& tokens, const at::Tensor& table,
                            const ParamTable& params, const config::ModelConfig& cfg,
                            const RopeTables& rope, const std::vector<int>& depths);

}  // namespace mtp::model
