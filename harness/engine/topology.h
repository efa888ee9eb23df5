// File: harness/engine/topology.h
//
// Where every rank sits: P pipeline ranks × DP data-parallel ranks (tensor, context and expert
// parallel sizes are 1). Transport rank r ↔ (pipeline rank, data-parallel rank) follows
// Megatron-LM's default rank order "tp-cp-ep-dp-pp" (megatron/core/parallel_state.py,
// initialize_model_parallel: tp varies fastest, pp slowest), which with TP = CP = EP = 1 is
//   r = dp + DP · pp.
// Example, P = 2, DP = 2: ranks 0, 1 are pipeline rank 0 (data-parallel ranks 0, 1); ranks 2, 3
// are pipeline rank 1. Data-parallel groups {0, 1}, {2, 3}; pipeline groups {0, 2}, {1, 3}.
#pragma once

#include <string>
#include <vector>

#include "harness/collectives/collectives.h"

namespace mtp::engine {

/// A rank's coordinates.
struct RankCoord {
  int pipeline_rank = 0;       ///< pp ∈ [0, P)
  int data_parallel_rank = 0;  ///< dp ∈ [0, DP)
};

class Topology {
 public:
  /// Throws InternalError unless P ≥ 1 and DP ≥ 1.
  Topology(int pipeline_size, int data_parallel_size);

  int pipeline_size() const { return pipeline_size_; }
  int data_parallel_size() const { return data_parallel_size_; }
  int world_size() const { return pipeline_size_ * data_parallel_size_; }

  /// Transport rank of (pp, dp): dp + DP·pp.
  int rank(int pipeline_rank, int data_parallel_rank) const;
  RankCoord coord(int rank) const;

  /// The ranks of pipeline rank `pipeline_rank`'s data-parallel group, dp ascending (the order
  /// main grads are summed in).
  collectives::Group data_parallel_group(int pipeline_rank) const;
  /// The pipeline ranks of data-parallel replica `data_parallel_rank`, pp ascending; element p is
  /// the transport rank of pipeline rank p.
  std::vector<int> pipeline_ranks(int data_parallel_rank) const;
  /// The group of the pipeline ranks that hold `stages` (string-order stage indices, ascending)
  /// in replica `data_parallel_rank`, in stage order: Megatron's embedding group for the stages
  /// holding a copy of the word embedding (spec §3.6). Stages of one pipeline rank count once.
  collectives::Group stage_group(const std::string& name, const std::vector<int>& stages,
                                 int data_parallel_rank) const;
  /// Every rank, ascending.
  collectives::Group world() const;

 private:
  int pipeline_size_, data_parallel_size_;
};

}  // namespace mtp::engine
