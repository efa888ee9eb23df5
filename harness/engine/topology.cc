#include "harness/engine/topology.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/common/error.h"

namespace mtp::engine {

Topology::Topology(int pipeline_size, int data_parallel_size, int context_parallel_size,
                   int expert_parallel_size)
    : pipeline_size_(pipeline_size),
      data_parallel_size_(data_parallel_size),
      context_parallel_size_(context_parallel_size),
      expert_parallel_size_(expert_parallel_size) {
  MTP_INTERNAL_ASSERT(pipeline_size >= 1 && data_parallel_size >= 1 && context_parallel_size >= 1 &&
                          expert_parallel_size >= 1 &&
                          grad_group_size() % expert_parallel_size == 0,
                      fmt::format("topology P = {}, DP = {}, CP = {}, EP = {}", pipeline_size,
                                  data_parallel_size, context_parallel_size, expert_parallel_size));
}

collectives::Group Topology::expert_parallel_group(const RankCoord& c) const {
  const int g = grad_group_rank(c), first = g - g % expert_parallel_size_;
  collectives::Group out{fmt::format("expert-parallel group of pipeline rank {}, members {}-{}",
                                     c.pipeline_rank, first, first + expert_parallel_size_ - 1),
                         {},
                         kExpertChannel};
  const int base = c.pipeline_rank * grad_group_size();  // rank = g + DP·CP·pp
  for (int i = 0; i < expert_parallel_size_; ++i) out.ranks.push_back(base + first + i);
  return out;
}

collectives::Group Topology::expert_data_parallel_group(const RankCoord& c) const {
  const int e = expert_parallel_rank(c);
  collectives::Group out{
      fmt::format("expert-data-parallel group of pipeline rank {}, EP rank {}", c.pipeline_rank, e),
      {}};
  const int base = c.pipeline_rank * grad_group_size();
  for (int g = e; g < grad_group_size(); g += expert_parallel_size_) out.ranks.push_back(base + g);
  return out;
}

int Topology::rank(int pipeline_rank, int data_parallel_rank, int context_parallel_rank) const {
  MTP_INTERNAL_ASSERT(
      pipeline_rank >= 0 && pipeline_rank < pipeline_size_ && data_parallel_rank >= 0 &&
          data_parallel_rank < data_parallel_size_ && context_parallel_rank >= 0 &&
          context_parallel_rank < context_parallel_size_,
      fmt::format("coordinate (pp {}, dp {}, cp {}) outside P = {}, DP = {}, CP = {}",
                  pipeline_rank, data_parallel_rank, context_parallel_rank, pipeline_size_,
                  data_parallel_size_, context_parallel_size_));
  return context_parallel_rank +
         context_parallel_size_ * (data_parallel_rank + data_parallel_size_ * pipeline_rank);
}

RankCoord Topology::coord(int rank) const {
  MTP_INTERNAL_ASSERT(rank >= 0 && rank < world_size(),
                      fmt::format("rank {} outside the world of {}", rank, world_size()));
  const int replica = rank % grad_group_size();
  return {rank / grad_group_size(), replica / context_parallel_size_,
          replica % context_parallel_size_};
}

collectives::Group Topology::grad_group(int pipeline_rank) const {
  collectives::Group g{
      fmt::format("{} group of pipeline rank {}",
                  context_parallel_size_ > 1 ? "data-and-context-parallel" : "data-parallel",
                  pipeline_rank),
      {}};
  for (int d = 0; d < data_parallel_size_; ++d) {
    for (int c = 0; c < context_parallel_size_; ++c) g.ranks.push_back(rank(pipeline_rank, d, c));
  }
  return g;
}

collectives::Group Topology::context_parallel_group(int pipeline_rank,
                                                    int data_parallel_rank) const {
  collectives::Group g{fmt::format("context-parallel group of pipeline rank {}, data-parallel "
                                   "rank {}",
                                   pipeline_rank, data_parallel_rank),
                       {}};
  for (int c = 0; c < context_parallel_size_; ++c) {
    g.ranks.push_back(rank(pipeline_rank, data_parallel_rank, c));
  }
  return g;
}

std::vector<int> Topology::pipeline_ranks(int data_parallel_rank, int context_parallel_rank) const {
  std::vector<int> r;
  for (int p = 0; p < pipeline_size_; ++p) {
    r.push_back(rank(p, data_parallel_rank, context_parallel_rank));
  }
  return r;
}

collectives::Group Topology::stage_group(const std::string& name, const std::vector<int>& stages,
                                         int data_parallel_rank, int context_parallel_rank) const {
  collectives::Group g{context_parallel_size_ > 1
                           ? fmt::format("{} of data-parallel rank {}, context-parallel rank {}",
                                         name, data_parallel_rank, context_parallel_rank)
                           : fmt::format("{} of data-parallel rank {}", name, data_parallel_rank),
                       {}};
  for (int s : stages) {
    const int r = rank(s % pipeline_size_, data_parallel_rank, context_parallel_rank);
    if (std::find(g.ranks.begin(), g.ranks.end(), r) == g.ranks.end()) g.ranks.push_back(r);
  }
  return g;
}

collectives::Group Topology::world() const {
  collectives::Group g{"every rank", {}};
  for (int r = 0; r < world_size(); ++r) g.ranks.push_back(r);
  return g;
}

}  // namespace mtp::engine
