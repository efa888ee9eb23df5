// File: harness/engine/executor.h
//
// Runs the forward and backward passes of one optimizer step on one pipeline rank: its
// schedule's op list (receive → compute → send) over a Transport.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/engine/chunk.h"
#include "harness/engine/chunk_graphs.h"
#include "harness/engine/microbatch_graph.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"
#include "harness/transport/transport.h"

namespace mtp::engine {

/// Per-microbatch losses from the loss stage, in microbatch order.
struct StepLosses {
  std::vector<double> lm;                ///< [M]
  std::vector<std::vector<double>> mtp;  ///< [M][D]
};

/// One pipeline rank's unit of compute between its receives and its sends: one op, or a combined
/// 1F1B steady pair run as one block (its forward op, then its backward op).
struct ComputeBlock {
  int pipeline_rank = 0;
  schedule::Op op;                              ///< the op (a combined pair's forward)
  std::optional<schedule::Op> paired_backward;  ///< a combined pair's backward op
};

/// How the executor runs a schedule's ops.
struct ExecutionOptions {
  /// Post each receive one op ahead and wait for it when the op starts (Megatron
  /// overlap_p2p_comm for the interleaved schedule).
  bool overlap_p2p = false;
  /// Combined 1F1B with expert parallelism: inside a combined step, each expert all-to-all node
  /// (dispatch, combine) runs on a side thread while the other microbatch's compute node that
  /// the sub-step order pairs it with runs on the rank's thread (Megatron combined_1f1b.py: the
  /// communication stream against the compute stream). The pairs are the adjacent sub-steps of
  /// ScheduleDef::combined_order with one all-to-all node and one compute node of opposite
  /// sides. The values, and so the bits, are those of the serial order: the two nodes share no
  /// tensor, and main grads are accumulated after the pair joins, in the serial order. On a CUDA
  /// `device` the all-to-alls' copies run on the device's side stream, ordered after the rank's
  /// compute issued before the pair (gpu/side_stream.h), so they overlap the paired compute node.
  bool overlap_expert_comm = false;
  /// The device the rank's chunks run on (CUDA: where the side stream of overlap_expert_comm is).
  at::Device device = at::kCPU;
  /// Called with the stage index after every backward call of a chunk (the whole chunk's, or a
  /// node's in combined 1F1B): where Megatron's DDP hook moves .grad into the main grads.
  std::function<void(int stage)> after_backward;
  /// CUDA graphs: when set, every microbatch's forward + backward (+ after_backward(0)) runs
  /// through this graph (engine/microbatch_graph.h). Needs a layout of one stage; not owned,
  /// kept by the caller across steps.
  MicrobatchGraph* graph = nullptr;
  /// CUDA graphs of a pipelined schedule: when set, every forward and backward op of a plain
  /// schedule runs its chunk through the stage's ChunkGraphs (engine/chunk_graphs.h); receives
  /// and sends stay outside the graphs. Not with `graph`, combined 1F1B or
  /// after_microbatch_backward; not owned, kept by the caller across steps.
  PipelineGraphs* pipeline_graphs = nullptr;
  /// Planted bugs (config/fault.h), unset in a correct run: called with the stage index before
  /// every backward op (kGradsZeroedBetweenMicrobatches), and the stage whose forward input is
  /// replaced by zeros (kStandaloneStageFedZeros; −1: none).
  std::function<void(int stage)> before_backward;
  int zero_input_stage = -1;
  /// Called once after each backward op's whole backward (every node of it), with the stage,
  /// the microbatch (index into this rank's microbatches) and the op's program: canonical
  /// accumulation takes each contribution apart here (engine/canonical_grads.h).
  std::function<void(int stage, int microbatch, const model::ChunkProgram& prog)>
      after_microbatch_backward;
  /// Per-op timing (`mtp-harness calibrate --validate`), unset in training: called on the rank's
  /// thread when a block's compute begins (its receive done, its program built) and when it ends
  /// (before its send), never nested on one rank; after_compute also when the compute throws
  /// (then its own exception is swallowed). Not called for runs through a CUDA graph.
  std::function<void(const ComputeBlock&)> before_compute;
  std::function<void(const ComputeBlock&)> after_compute;
  /// Traces (tests), unset in training: called on the rank's thread after each node of a
  /// combined 1F1B step ran, with the side, the node's kind and layer (−1 outside a layer), in
  /// the order the nodes ran (an overlapped pair's two nodes after it joins, in sub-step order).
  std::function<void(schedule::OpType side, model::NodeKind kind, int layer)> after_combined_node;
};

/// One pipeline rank's share of a step: where its chunks are and who its neighbours are.
struct RankStep {
  int pipeline_rank = 0;
  /// Indexed by stage index i = v·P + p; the entries of this rank's stages (p, p + P, …) are
  /// set, the others may be null.
  std::vector<const ModelChunk*> chunks;
  /// Transport rank of every pipeline rank of this rank's data-parallel replica (index p).
  std::vector<int> transport_ranks;
};

/// Runs one pipeline rank's ops of one step (Megatron-LM schedules.py and combined_1f1b.py,
/// spec §4.2–4.6): receive → compute → send for each op of schedule::rank_ops. microbatches has
/// M entries. Grads accumulate into the chunks' parameters (.grad), first in first out per
/// chunk. Plain schedules run each chunk's forward as one autograd graph and its backward in one
/// call; combined 1F1B (ScheduleKind::kCombined1F1B) splits every chunk into nodes with detached
/// boundaries and runs each steady (F, B) pair as one combined step whose node forwards and node
/// backwards interleave layer by layer in Megatron's sub-step order (spec §4.6): B.mtp_post,
/// B.combine, F.attn, B.mlp, F.dispatch, B.dispatch, F.mlp, F.combine, B.attn, F.mtp_post.
/// Returns the per-microbatch losses when this rank holds the loss stage (else empty vectors).
/// Throws what the transport throws (InfraError, TransportAborted) and model errors.
StepLosses run_rank_step(const RankStep& rank, const layout::PipelineLayout& layout,
                         const schedule::ScheduleConfig& schedule,
                         const std::vector<MicrobatchTensors>& microbatches,
                         transport::Transport& transport, const ExecutionOptions& options = {});

/// Every pipeline rank of one replica as its own thread over `transport` (transport rank p =
/// pipeline rank p), chunks[i] the chunk of stage i: benchmarks and tests. An exception on any
/// rank aborts the transport, joins every thread and is rethrown, a rank's own failure before a
/// TransportAborted it caused elsewhere.
StepLosses run_pipeline_step(const std::vector<std::unique_ptr<ModelChunk>>& chunks,
                             const layout::PipelineLayout& layout,
                             const schedule::ScheduleConfig& schedule,
                             const std::vector<MicrobatchTensors>& microbatches,
                             transport::Transport& transport, const ExecutionOptions& options = {});

/// Runs body(i) for i in [0, n) on n threads (inline when n == 1). When body(i) throws, calls
/// on_error(i, what) (to abort the transport and wake the others), joins every thread and
/// rethrows the lowest i's failure that is not a TransportAborted (else the lowest i's).
void run_on_threads(int n, const std::function<void(int)>& body,
                    const std::function<void(int, const std::string&)>& on_error);

}  // namespace mtp::engine
