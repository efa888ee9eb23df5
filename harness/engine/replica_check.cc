#include "harness/engine/replica_check.h"

#include <fmt/format.h>
#include <xxhash.h>

#include "harness/config/param_specs.h"
#include "harness/model/expert_parallel.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace mtp::engine {
namespace {

/// The EP rank whose members hold placement parameter `p`, or −1 when every rank of its stage
/// does (not a routed expert, or EP 1).
int expert_holder(const PlacedParam& p, const Topology& topo, int64_t num_experts) {
  const int64_t e = config::routed_expert_index(p.name);
  if (e < 0 || topo.expert_parallel_size() == 1) return -1;
  return model::expert_owner(e, num_experts, topo.expert_parallel_size());
}

/// The (placement index, stage) of every tensor rank `r` holds, in LocalModel::params order.
std::vector<std::pair<size_t, int>> copies_of(const ParamPlacement& placement, int pipeline_size,
                                              const Topology& topo, int r, int64_t num_experts) {
  const RankCoord c = topo.coord(r);
  std::vector<std::pair<size_t, int>> out;
  for (size_t i = 0; i < placement.params.size(); ++i) {
    const int holder = expert_holder(placement.params[i], topo, num_experts);
    if (holder >= 0 && holder != topo.expert_parallel_rank(c)) continue;
    for (int stage : placement.params[i].stages) {
      if (stage % pipeline_size == c.pipeline_rank) out.emplace_back(i, stage);
    }
  }
  return out;
}

/// "" when every copy matches the recorded one (data-parallel rank 0, owner stage), else the
/// first mismatch in canonical order. `digests`: rank r's digests at r.
std::string compare_replicas(int64_t step, const std::vector<at::Tensor>& digests,
                             const ParamPlacement& placement, const Topology& topo,
                             int pipeline_size, int64_t num_experts) {
  struct Copy {
    int rank, stage;
    int64_t digest;
  };
  std::vector<std::vector<Copy>> by_param(placement.params.size());
  for (int r = 0; r < topo.world_size(); ++r) {
    const at::Tensor d = digests[r].cpu();
    const auto list = copies_of(placement, pipeline_size, topo, r, num_experts);
    for (size_t k = 0; k < list.size(); ++k) {
      by_param[list[k].first].push_back({r, list[k].second, d[k].item<int64_t>()});
    }
  }
  auto where = [&](const Copy& c) {
    const RankCoord rc = topo.coord(c.rank);
    if (topo.context_parallel_size() > 1) {
      return fmt::format(
          "data-parallel rank {}, context-parallel rank {}, pipeline rank {} "
          "(stage {})",
          rc.data_parallel_rank, rc.context_parallel_rank, rc.pipeline_rank, c.stage);
    }
    return fmt::format("data-parallel rank {}, pipeline rank {} (stage {})", rc.data_parallel_rank,
                       rc.pipeline_rank, c.stage);
  };
  for (size_t i = 0; i < by_param.size(); ++i) {
    const PlacedParam& p = placement.params[i];
    // The recorded copy: gradient-group member 0's, or for a routed expert its EP rank's.
    const int recorded_member = std::max(expert_holder(p, topo, num_experts), 0);
    const Copy* ref = nullptr;
    for (const auto& c : by_param[i]) {
      if (c.stage == p.stages.front() &&
          topo.grad_group_rank(topo.coord(c.rank)) == recorded_member) {
        ref = &c;
      }
    }
    MTP_INTERNAL_ASSERT(ref != nullptr, fmt::format("no recorded copy of {}", p.name));
    for (const auto& c : by_param[i]) {
      if (c.digest == ref->digest) continue;
      return fmt::format(
          "step {}: weight {} after the optimizer step differs between copies: {} has XXH3-64 "
          "{:016x}, the recorded copy on {} has {:016x} (a data-parallel replica or an "
          "embedding copy drifted)",
          step, p.name, where(c), static_cast<uint64_t>(c.digest), where(*ref),
          static_cast<uint64_t>(ref->digest));
    }
  }
  return "";
}

}  // namespace

void check_replicas(int64_t step, const LocalModel& model, const ParamPlacement& placement,
                    const Topology& topo, int pipeline_size, int64_t num_experts,
                    collectives::Communicator& comm, const at::Device& device) {
  if (topo.world_size() == 1 && placement.embedding_group.size() < 2) return;
  const int64_t n = static_cast<int64_t>(model.params.size());
  at::Tensor mine = at::empty({n}, at::kLong);
  for (int64_t i = 0; i < n; ++i) {
    const at::Tensor w = model.params[i].weight.detach().contiguous().cpu();
    const uint64_t h = XXH3_64bits(w.data_ptr(), w.nbytes());
    int64_t v;
    std::memcpy(&v, &h, sizeof v);
    mine[i] = v;
  }
  const collectives::Group world = topo.world();
  std::vector<std::vector<int64_t>> shapes;
  for (int r = 0; r < topo.world_size(); ++r) {
    shapes.push_back(
        {static_cast<int64_t>(copies_of(placement, pipeline_size, topo, r, num_experts).size())});
  }
  auto all = comm.gather(world, 0, mine.to(device), shapes);
  at::Tensor verdict = at::zeros({1}, at::TensorOptions().dtype(at::kLong).device(device));
  std::string report;
  if (comm.rank() == 0) {
    report = compare_replicas(step, all, placement, topo, pipeline_size, num_experts);
    if (!report.empty()) verdict.fill_(1);
  }
  comm.broadcast(world, 0, verdict);
  if (verdict.cpu().item<int64_t>() == 0) return;
  if (comm.rank() == 0) throw ReplicaDriftError(report);
  throw ReplicaDriftError(
      fmt::format("rank {}: stopped at step {}: rank 0 found a parameter "
                  "copy that drifted",
                  comm.rank(), step));
}

}  // namespace mtp::engine
