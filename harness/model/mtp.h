// File: harness/model/mtp.h
//
// The Multi-Token Prediction block (MTP depths 1..D), shared by reference/ and candidate/.
// Source: Megatron-LM multi_token_prediction.py, MultiTokenPredictionLayer.forward
// (spec megatron_mtp_standalone.md §1.2–1.3; DeepSeek-V3 report §2.2).
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "harness/config/model_config.h"
#include "harness/model/layers.h"
#include "harness/model/param_table.h"

namespace mtp::model {

/// Shift left by one along the last (sequence) dimension and write 0 into the vacated last slot.
/// t [b, s] (any dtype) → [b, s]. Megatron roll_tensor (no packing, no CP);
/// e.g. [10,20,30,40,50] → [20,30,40,50,0].
at::Tensor roll_left(const at::Tensor& t);

/// roll_left of the whole sequence when this rank may hold only a shard of it: cp->roll_left
/// with context parallelism (cp non-null, size > 1), else roll_left(t).
at::Tensor roll_sequence_left(const at::Tensor& t, ContextParallel* cp);

/// Runs MTP depths k = 1..D on the trunk output h0 [s, b, H] (after the decoder final norm).
/// For each k: ids_k = roll_left(ids_{k−1}); e = embedding(ids_k);
/// z = eh_proj(cat(enorm(e), hnorm(h_{k−1}))) (embedding first); one transformer layer (MoE when
/// cfg.mtp_layer_is_moe(): the last decoder layer's kind, spec §1.2);
/// h_k = final_layernorm_k(·). The next depth consumes the normalised h_k.
/// tokens [b, s] int64; embedding_table [V, H] (this stage's copy). Returns [h1, …, hD], each
/// [s, b, H]. Weights are read from `params` under "mtp.layers.<k−1>.".
std::vector<at::Tensor> mtp_block_forward(const at::Tensor& h0, const at::Tensor& tokens,
                                          const at::Tensor& embedding_table,
                                          const ParamTable& params, const config::ModelConfig& cfg,
                                          const RopeTables& rope);

}  // namespace mtp::model
