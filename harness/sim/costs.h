// File: harness/sim/costs.h
//
// What one microbatch costs on a GPU, node kind by node kind (issue 23): the forward and backward
// milliseconds `mtp-harness calibrate` measured with the harness's own kernels (bf16,
// deterministic, flash attention) at a model's dimensions, and the link that carries pipeline
// messages. Stored as JSON (golden/perf/costs_<gpu>.json):
//   {"schema_version": 1, "gpu": "NVIDIA H200", "fingerprint": {...}, "measured_at": {...},
//    "notes": [...], "nodes": {"embedding": {"forward_ms": 0.1, "backward_ms": 0.2}, ...},
//    "link": {"name": "nvlink", "bandwidth_gb_per_s": 450, "latency_us": 3}}
// Torch-free.
#pragma once

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/config/model_config.h"

namespace mtp::sim {

/// The node kinds a stage is priced by. Decoder and MTP layers come in a dense and an MoE kind;
/// an MTP block is its enorm, hnorm, eh_proj and transformer layer (not its head); a head is the
/// final norm's output projection to the vocabulary and its cross entropy. A chunk op is the fixed
/// cost of one model chunk's forward or backward for one microbatch whatever the chunk holds (the
/// executor's and autograd's host work per op; an empty stage costs just this); optional in a
/// costs file (0 when absent: hand-made tables and files calibrated before it existed).
enum class CostNode {
  kEmbedding,
  kDecoderDense,
  kDecoderMoe,
  kMtpBlockDense,
  kMtpBlockMoe,
  kFinalLayernorm,
  kOutputHead,
  kMtpHead,
  kChunkOp,
};
inline constexpr std::array<CostNode, 9> kAllCostNodes{
    CostNode::kEmbedding,     CostNode::kDecoderDense, CostNode::kDecoderMoe,
    CostNode::kMtpBlockDense, CostNode::kMtpBlockMoe,  CostNode::kFinalLayernorm,
    CostNode::kOutputHead,    CostNode::kMtpHead,      CostNode::kChunkOp};
/// "embedding", "decoder_dense", "decoder_moe", "mtp_block_dense", "mtp_block_moe",
/// "final_layernorm", "output_head", "mtp_head", "chunk_op": the JSON keys.
const char* cost_node_name(CostNode n);

/// Forward and backward time of one node for one microbatch, milliseconds.
struct NodeCost {
  double forward_ms = 0.0;
  double backward_ms = 0.0;
};

/// A point-to-point link: a message of B bytes takes latency + B / bandwidth.
struct Link {
  std::string name = "nvlink";
  double bandwidth_gb_per_s = 450.0;  ///< GB/s (1e9 bytes), one direction
  double latency_us = 3.0;
  /// Milliseconds a message of `bytes` takes.
  double message_ms(double bytes) const {
    return latency_us * 1e-3 + bytes / (bandwidth_gb_per_s * 1e9) * 1e3;
  }
};
/// NVLink-class (H200 NVLink 4: 450 GB/s per direction, ~3 µs) and InfiniBand-class (NDR 400
/// Gb/s = 50 GB/s, ~5 µs) defaults; "nvlink" | "ib". Throws InputError for another name.
Link named_link(std::string_view name);

/// Every node's cost, the link, and where they were measured.
struct CostTable {
  std::string gpu;                 ///< "NVIDIA H200"
  nlohmann::json fingerprint;      ///< driver, CUDA, LibTorch, commit (free-form object)
  nlohmann::json measured_at;      ///< the model dimensions timed (free-form object)
  std::vector<std::string> notes;  ///< what was reduced to fit and why
  std::map<CostNode, NodeCost> nodes;
  Link link;
  std::string source;  ///< the file it was read from ("" when made here), for errors
  /// The cost of `n`; throws InputError naming the source and the node when the table lacks it
  /// (kChunkOp: zero when absent).
  NodeCost at(CostNode n) const;
};

/// Largest node time (ms) and latency (µs) a costs file may hold, and the bandwidth range
/// (GB/s): beyond them a simulated step overflows or means nothing (a day per node).
inline constexpr double kMaxNodeMs = 8.64e7;
inline constexpr double kMaxLatencyUs = 1e9;
inline constexpr double kMinBandwidthGbPerS = 1e-3, kMaxBandwidthGbPerS = 1e6;

/// Throws InputError unless `costs` were measured for a model of `model`'s dimensions: every
/// one of hidden_size, ffn_hidden_size, num_attention_heads, vocab_size, seq_length and
/// micro_batch_size that measured_at records must equal the model's (node costs are per layer
/// at those dimensions). A table without measured_at is accepted (hand-made costs).
void check_costs_fit(const CostTable& costs, const config::ModelConfig& model);

/// The MTP head's cost from `difference` (a loss timed with one MTP depth minus the same loss
/// without) and `lm_head` (the LM head's cost), per direction: the difference, or the LM head's
/// cost where the difference is under a quarter of it. The MTP head does the LM head's work
/// (the same GEMM to the vocabulary and cross entropy), so a smaller difference is the noise of
/// two separate timings. `notes` (may be null) gets a line per direction replaced.
NodeCost mtp_head_cost(const NodeCost& difference, const NodeCost& lm_head,
                       std::vector<std::string>* notes);

/// The model dimensions a costs file's measured_at records (the ones check_costs_fit compares:
/// hidden_size, ffn_hidden_size, num_attention_heads, vocab_size, seq_length, micro_batch_size),
/// as a JSON object of `model`'s values; calibrate adds its method's keys to it.
nlohmann::json measured_dimensions(const config::ModelConfig& model);

/// The JSON form above.
nlohmann::json to_json(const CostTable& t);
/// Reads `text` (from `source`, named in errors). Throws InputError naming the source and the key:
/// not JSON, schema_version not 1, a node key that is not a CostNode name, a missing or negative
/// or non-finite time, a non-positive bandwidth, a negative latency.
CostTable parse_costs(const std::string& text, const std::string& source);
/// Reads a costs file (InputError when it cannot be read or parsed).
CostTable read_costs(const std::string& path);

}  // namespace mtp::sim
