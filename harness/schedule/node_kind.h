// File: harness/schedule/node_kind.h
//
// The kinds of node a chunk program is made of (harness/model/program.h), named here because
// schedules order them: a combined 1F1B step interleaves one microbatch's forward nodes with
// another's backward nodes by kind (combined_1f1b.cc). Torch-free.
#pragma once

namespace mtp::schedule {

/// What a node of a chunk program computes: the sub-steps Megatron-LM's combined 1F1B
/// interleaves (megatron/core/models/common/model_chunk_schedule_plan.py, fine-grained
/// callables): the embedding, a layer's attention (with the MoE router and permutation), the
/// token dispatch (all-to-all), the MLP or experts, the combine (unpermute, residual), an MTP
/// depth's final norm, the trunk's final layernorm, and the heads with their losses.
enum class NodeKind {
  kPreProcess,
  kAttention,
  kDispatch,
  kMlp,
  kCombine,
  kMtpPost,
  kFinalLayernorm,
  kPostProcess
};

/// "pre_process", "attn", "dispatch", "mlp", "combine", "mtp_post", "final_layernorm",
/// "post_process" (what notes and traces print).
const char* node_kind_name(NodeKind kind);

}  // namespace mtp::schedule
