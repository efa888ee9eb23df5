#include "harness/engine/replica_check.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>
#include <utility>
#include <vector>

namespace mtp::engine {
namespace {

/// The (placement index, stage) of every tensor a rank of pipeline rank `pp` holds, in
/// LocalModel::params order.
std::vector<std::pair<size_t, int>> copies_of(const ParamPlacement& placement, int pipeline_size,
                                              int pp) {
  std::vector<std::pair<size_t, int>> out;
  for (size_t i = 0; i < placement.params.size(); ++i) {
    for (int stage : placement.params[i].stages) {
      if (stage % pipeline_size == pp) out.emplace_back(i, stage);
    }
  }
  return out;
}

/// "" when every copy matches the recorded one (data-parallel rank 0, owner stage), else the
/// first mismatch in canonical order. `digests`: rank r's digests at r.
std::string compare_replicas(int64_t step, const std::vector<at::Tensor>& digests,
                             const ParamPlacement& placement, const Topology& topo,
                             int pipeline_size) {
  struct Copy {
    int rank, stage;
    int64_t digest;
  };
  std::vector<std::vector<Copy>> by_param(placement.params.size());
  for (int r = 0; r < topo.world_size(); ++r) {
    const at::Tensor d = digests[r].cpu();
    const auto list = copies_of(placement, pipeline_size, topo.coord(r).pipeline_rank);
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
    const Copy* ref = nullptr;
    for (const auto& c : by_param[i]) {
      const RankCoord rc = topo.coord(c.rank);
      if (c.stage == p.stages.front() && rc.data_parallel_rank == 0 &&
          rc.context_parallel_rank == 0) {
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
                    const Topology& topo, int pipeline_size, collectives::Communicator& comm,
                    const at::Device& device) {
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
    shapes.push_back({static_cast<int64_t>(
        copies_of(placement, pipeline_size, topo.coord(r).pipeline_rank).size())});
  }
  auto all = comm.gather(world, 0, mine.to(device), shapes);
  at::Tensor verdict = at::zeros({1}, at::TensorOptions().dtype(at::kLong).device(device));
  std::string report;
  if (comm.rank() == 0) {
    report = compare_replicas(step, all, placement, topo, pipeline_size);
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
