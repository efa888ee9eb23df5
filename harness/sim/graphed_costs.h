// File: harness/sim/graphed_costs.h
//
// Node costs from the stage ops of graphed pipelined runs (`mtp-harness calibrate
// --cuda-graphs`, issue 23): with every chunk's forward and backward replayed as a CUDA graph an
// op's time is the device's work alone, which eager calibration cannot see when the host issues
// kernels slower than the device runs them (the small model on an H100: a graphed one-layer op
// took 0.29 ms forward against 1.03 ms priced from eager bursts). A dense model's node kinds are
// read off the stages of two layouts, each stage one kind:
//   with MTP (kGraphedLayoutWithMtp):       E | t | ttt | t | m | L   (P = 3, V = 2)
//   without MTP (kGraphedLayoutWithoutMtp): E | t | ttt | L           (P = 2, V = 2)
// and priced as the simulator prices a stage (sim/costs.h: chunk_op + the stage's nodes).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "harness/sim/costs.h"

namespace mtp::sim {

inline constexpr const char* kGraphedLayoutWithMtp = "E|t|ttt|t|m|L";
inline constexpr int kGraphedPipelineWithMtp = 3;
inline constexpr const char* kGraphedLayoutWithoutMtp = "E|t|ttt|L";
inline constexpr int kGraphedPipelineWithoutMtp = 2;

/// One microbatch's op time per stage kind of the two graphed layouts (ms, medians).
struct GraphedStageTimes {
  NodeCost embedding;         ///< E
  NodeCost one_layer;         ///< t (the mean of the layouts' one-layer stages)
  NodeCost three_layers;      ///< ttt
  NodeCost mtp_block;         ///< m (standalone MTP depth 1)
  NodeCost loss_with_mtp;     ///< L of the MTP layout: final norm, LM head and MTP head
  NodeCost loss_without_mtp;  ///< L without MTP: final norm and LM head
};

/// The node costs of a dense model from its graphed stage times, forward and backward each: a
/// layer = (ttt − t) / 2; chunk_op = t − layer (an op's fixed part); embedding = E − chunk_op;
/// mtp_block_dense = m − chunk_op; output_head = L without MTP − chunk_op, with final_layernorm
/// priced inside it (0: the loss stage always holds both); mtp_head = mtp_head_cost(L with MTP
/// − L without, output_head) (sim/costs.h: the LM head's cost where the difference is noise). The
/// MoE kinds take the dense ones' (a dense model has
/// none). Negative differences (noise) clamp to 0. `notes` gets one line per estimate replaced.
/// Throws InputError when a time is negative or not finite.
std::map<CostNode, NodeCost> costs_from_graphed_stages(const GraphedStageTimes& t,
                                                       std::vector<std::string>* notes);

}  // namespace mtp::sim
