// File: harness/engine/run_config.h
//
// What one training run needs besides the model: optimizer and step settings, and the variant
// (implementation, layout, schedule, execution) that distinguishes it from its siblings.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mtp {
namespace transport {
class Transport;
}  // namespace transport
}  // namespace mtp

namespace mtp::engine {

/// Training settings shared by every variant of a scenario.
struct TrainingConfig {
  int64_t steps = 3;             ///< optimizer steps
  int64_t num_microbatches = 8;  ///< M per step
  uint64_t seed = 1234;          ///< initial weights (per-parameter generators)
  double lr = 1e-3;              ///< Adam learning rate (constant)
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  double weight_decay = 0.0;     ///< decoupled (AdamW), as Megatron's Adam
  double clip_grad = 0.0;        ///< max global grad norm; 0 = clipping off (the default)
  std::string dtype = "float32"; ///< model and main-grad dtype: "float32" | "float64"
  std::string device = "cpu";    ///< "cpu" | "cuda"
};

/// One variant of a scenario.
struct VariantSpec {
  std::string name;              ///< unique in the scenario, [A-Za-z0-9_.-]+
  std::string implementation;    ///< "reference" | "candidate"
  std::string layout;            ///< Megatron layout string; "" = default even split
  int pipeline_size = 1;         ///< P
  int virtual_size = 1;          ///< V when `layout` is empty (else derived from the layout)
  /// "none" | "1f1b" | "interleaved" | "combined_1f1b"; "" = derived (P=1: none, V=1: 1f1b,
  /// else interleaved)
  std::string schedule;
  int microbatch_group_size = 0; ///< N for interleaved; 0 = P
  std::optional<double> clip_grad;                ///< overrides TrainingConfig::clip_grad
  std::optional<double> mtp_loss_scaling_factor;  ///< overrides the model's λ (negative controls)
  int64_t transport_max_delay_us = 0;  ///< random message delays (in-process transport)
  bool overlap_p2p = false;  ///< post receives one op ahead (Megatron overlap_p2p_comm)
  std::optional<std::string> kernels;  ///< overrides the model's kernels ("torch" | "harness")
};

/// Where and how to run.
struct RunOptions {
  /// Pipeline ranks this process runs; empty = all P ranks as threads. With a subset (one
  /// process per rank), `transport` must connect every process, and only the process holding
  /// rank 0 writes the record.
  std::vector<int> local_ranks;
  transport::Transport* transport = nullptr;  ///< null: an in-process transport for all ranks
  int device_index = 0;         ///< CUDA device of this process's ranks (device = "cuda")
  std::string record_path;       ///< HDF5 record to write (atomically)
  std::string scenario_name;
  std::chrono::milliseconds recv_timeout{120000};
  uint64_t delay_seed = 0;       ///< seed of random transport delays
};

}  // namespace mtp::engine
