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

/// Runs every rank's ops for one step. chunks[i] is the chunk of stage index i (i = v·P + p);
/// microbatches has M entries. Grads accumulate into the chunks' parameters (.grad), first in
/// first out per chunk. An exception on any rank aborts the transport, joins every thread and is
/// rethrown (the lowest failing rank's, prefixed with the rank and its op).
/// Schedule semantics: Megatron-LM schedules.py (spec §4.2–4.5).
StepLosses run_pipeline_step(const std::vector<std::unique_ptr<ModelChunk>>& chunks,
                             const layout::PipelineLayout& layout,
                             const schedule::ScheduleConfig& schedule,
                             const std::vector<MicrobatchTensors>& microbatches,
                             transport::Transport& transport);

}  // namespace mtp::engine
