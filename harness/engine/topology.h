// File: harness/engine/topology.h
//
// Where every rank sits: P pipeline ranks × DP data-parallel ranks × CP context-parallel ranks
// (tensor and expert parallel sizes are 1). Transport rank r ↔ (pipeline rank, data-parallel
// rank, context-parallel rank) follows Megatron-LM's default rank order "tp-cp-ep-dp-pp"
// (megatron/core/parallel_state.py, initialize_model_parallel: tp varies fastest, pp slowest),
// which with TP = EP = 1 is
//   r = cp + CP · (dp + DP · pp).
// Example, P = 2, DP = 2, CP = 1: ranks 0, 1 are pipeline rank 0 (data-parallel ranks 0, 1);
// ranks 2, 3 are pipeline rank 1. Data-parallel groups {0, 1}, {2, 3}; pipeline groups {0, 2},
// {1, 3}. With CP = 2 (P = 2, DP = 1): context-parallel groups {0, 1}, {2, 3}; pipeline groups
// {0, 2}, {1, 3}; the gradient group of a pipeline rank (Megatron's data-parallel group "with
// context parallel", over which main grads are averaged and the distributed optimizer shards)
// is every (dp, cp) of it: {0, 1}, {2, 3}.
// Expert parallelism (EP) does not add ranks: the expert layers regroup each gradient group
// (Megatron's expert rank order "tp-ep-dp-pp" over the same ranks, TP = 1): its members
// g = cp + CP·dp form expert-parallel groups of EP consecutive members and, across them,
// expert-data-parallel groups of the members with equal g mod EP (over which expert grads are
// reduced). Example, DP = 4, EP = 2: EP groups {0, 1}, {2, 3}; expert-DP groups {0, 2}, {1, 3}.
#pragma once

#include <string>
#include <vector>

#include "harness/collectives/collectives.h"

namespace mtp::engine {

/// A rank's coordinates.
struct RankCoord {
  int pipeline_rank = 0;          ///< pp ∈ [0, P)
  int data_parallel_rank = 0;     ///< dp ∈ [0, DP)
  int context_parallel_rank = 0;  ///< cp ∈ [0, CP)
};

/// collectives::Group::channel of the expert-parallel groups.
inline constexpr uint64_t kExpertChannel = 0x4550;  // "EP"

class Topology {
 public:
  /// Throws InternalError unless P ≥ 1, DP ≥ 1, CP ≥ 1, EP ≥ 1 and EP divides DP·CP.
  Topology(int pipeline_size, int data_parallel_size, int context_parallel_size = 1,
           int expert_parallel_size = 1);

  int pipeline_size() const { return pipeline_size_; }
  int data_parallel_size() const { return data_parallel_size_; }
  int context_parallel_size() const { return context_parallel_size_; }
  int expert_parallel_size() const { return expert_parallel_size_; }
  /// DP · CP: the size of a gradient group.
  int grad_group_size() const { return data_parallel_size_ * context_parallel_size_; }
  int world_size() const { return pipeline_size_ * grad_group_size(); }

  /// Transport rank of (pp, dp, cp): cp + CP·(dp + DP·pp).
  int rank(int pipeline_rank, int data_parallel_rank, int context_parallel_rank = 0) const;
  RankCoord coord(int rank) const;
  /// A rank's index in its gradient group: cp + CP·dp.
  int grad_group_rank(const RankCoord& c) const {
    return c.context_parallel_rank + context_parallel_size_ * c.data_parallel_rank;
  }

  /// The ranks of pipeline rank `pipeline_rank`'s gradient group (Megatron's data-parallel group
  /// with context parallel): every (dp, cp) of it in grad_group_rank order, the order main grads
  /// are summed in. With CP = 1 this is the data-parallel group.
  collectives::Group grad_group(int pipeline_rank) const;
  /// The context-parallel group of (pp, dp): cp ascending.
  collectives::Group context_parallel_group(int pipeline_rank, int data_parallel_rank) const;
  /// The pipeline ranks of replica (dp, cp), pp ascending; element p is the transport rank of
  /// pipeline rank p.
  std::vector<int> pipeline_ranks(int data_parallel_rank, int context_parallel_rank = 0) const;
  /// The group of the pipeline ranks that hold `stages` (string-order stage indices, ascending)
  /// in replica (dp, cp), in stage order: Megatron's embedding group for the stages holding a
  /// copy of the word embedding (spec §3.6). Stages of one pipeline rank count once.
  collectives::Group stage_group(const std::string& name, const std::vector<int>& stages,
                                 int data_parallel_rank, int context_parallel_rank = 0) const;
  /// Every rank, ascending.
  collectives::Group world() const;

  /// The transport rank of member `g` of pipeline rank `pipeline_rank`'s gradient group.
  int grad_group_member(int pipeline_rank, int g) const {
    return g + grad_group_size() * pipeline_rank;
  }
  /// A rank's EP rank: grad_group_rank mod EP.
  int expert_parallel_rank(const RankCoord& c) const {
    return grad_group_rank(c) % expert_parallel_size_;
  }
  /// The expert-parallel group of the rank at `c`: the EP consecutive gradient-group members
  /// around it, EP rank ascending (Megatron's expert-model-parallel group), on channel
  /// kExpertChannel (its collectives run on a Communicator of their own).
  collectives::Group expert_parallel_group(const RankCoord& c) const;
  /// The expert-data-parallel group of the rank at `c`: the gradient-group members with its EP
  /// rank, ascending (Megatron's expert-data-parallel group, over which expert grads are summed).
  collectives::Group expert_data_parallel_group(const RankCoord& c) const;

 private:
  int pipeline_size_, data_parallel_size_, context_parallel_size_, expert_parallel_size_;
};

}  // namespace mtp::engine
