// File: harness/engine/executor.h
//
// Runs the forward and backward passes of one optimizer step: P pipeline ranks as threads, each
// executing its schedule's op list (receive → compute → send) over a Transport.
#pragma once

#include <memory>
#include <vector>

#include "harness/engine/chunk.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"
#include "harness/transport/transport.h"

namespace mtp::engine {

/// Per-microbatch losses from the loss stage, in microbatch order.
struct StepLosses {
  std::vector<double> lm;                ///< [M]
  std::vector<std::vector<double>> mtp;  ///< [M][D]
};

/// How the executor runs a schedule's ops.
struct ExecutionOptions {
  /// Post each receive one op ahead and wait for it when the op starts (Megatron
  /// overlap_p2p_comm for the interleaved schedule).
  bool overlap_p2p = false;
};

/// Runs the ops of `local_ranks` (empty = every rank; each as its own thread) for one step. chunks[i] is the chunk of stage index i (i = v·P + p);
/// microbatches has M entries. Grads accumulate into the chunks' parameters (.grad), first in
/// first out per chunk. Plain schedules run each chunk's forward as one autograd graph and its
/// backward in one call; combined 1F1B (ScheduleKind::kCombined1F1B) splits every chunk into
/// nodes with detached boundaries and runs each steady (F, B) pair as one combined step whose
/// node forwards and node backwards interleave layer by layer in Megatron's sub-step order
/// (spec §4.6): B.mtp_post, B.combine, F.attn, B.mlp, F.dispatch, B.dispatch, F.mlp, F.combine,
/// B.attn, F.mtp_post. An exception on any rank aborts the transport, joins every thread and is
/// rethrown (a rank that failed for its own reason before one that was only aborted).
/// Schedule semantics: Megatron-LM schedules.py and combined_1f1b.py (spec §4.2–4.6).
StepLosses run_pipeline_step(const std::vector<std::unique_ptr<ModelChunk>>& chunks,
                             const layout::PipelineLayout& layout,
                             const schedule::ScheduleConfig& schedule,
                             const std::vector<MicrobatchTensors>& microbatches,
                             transport::Transport& transport,
                             const ExecutionOptions& options = {},
                             const std::vector<int>& local_ranks = {});

}  // namespace mtp::engine
