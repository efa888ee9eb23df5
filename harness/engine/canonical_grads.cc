// collect_microbatch_grads, finalize_canonical_grads: canonical accumulation
// (canonical_grads.h).

#include "harness/engine/canonical_grads.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <algorithm>

#include "harness/common/error.h"
#include "harness/config/param_specs.h"

namespace mtp::engine {
namespace {

using Use = model::ChunkProgram::EmbeddingUse;

/// `grad` (or zeros of `p`'s shape when undefined) in the main-grad dtype: bf16 widened exactly.
at::Tensor widened(const at::Tensor& grad, const LocalParam& p) {
  const auto dtype = p.main_grad.scalar_type();
  if (!grad.defined()) return at::zeros(p.weight.sizes(), p.main_grad.options());
  return grad.scalar_type() == dtype ? grad : grad.to(dtype);
}

/// Every holder of `placed` (each data-parallel replica of each stage holding a copy), ascending.
collectives::Group holders(const PlacedParam& placed, const Topology& topo) {
  collectives::Group g{fmt::format("canonical accumulation of {}", placed.name), {}};
  for (int d = 0; d < topo.data_parallel_size(); ++d) {
    for (int s : placed.stages) {
      const int r = topo.rank(s % topo.pipeline_size(), d);
      if (std::find(g.ranks.begin(), g.ranks.end(), r) == g.ranks.end()) g.ranks.push_back(r);
    }
  }
  std::sort(g.ranks.begin(), g.ranks.end());
  return g;
}

}  // namespace

void collect_microbatch_grads(LocalModel& model, int stage, int64_t global_microbatch,
                              const model::ChunkProgram& prog) {
  c10::NoGradGuard no_grad;
  const int64_t base = global_microbatch * model::ChunkProgram::kUseSlots;
  for (auto& p : model.params) {
    if (p.stage != stage || !p.weight.grad().defined()) continue;
    p.contributions.emplace_back(base, widened(p.weight.grad(), p));
    p.weight.mutable_grad().reset();
  }
  for (const auto& [use, leaf] : prog.embedding_uses()) {
    LocalParam* table = nullptr;
    for (auto& p : model.params) {
      if (p.stage == stage && p.name == config::kWordEmbeddingName) table = &p;
    }
    MTP_INTERNAL_ASSERT(table != nullptr,
                        fmt::format("stage {} uses the word embedding without a copy", stage));
    table->contributions.emplace_back(base + static_cast<int64_t>(use),
                                      widened(leaf.grad(), *table));
  }
}

void finalize_canonical_grads(LocalModel& model, const ParamPlacement& placement,
                              const Topology& topology, int rank, collectives::Communicator& comm) {
  c10::NoGradGuard no_grad;
  (void)rank;
  // In canonical (placement) order, so that every holder group meets its collectives in the same
  // order on every member.
  std::vector<LocalParam*> local;
  for (auto& p : model.params) local.push_back(&p);
  std::stable_sort(local.begin(), local.end(),
                   [](const LocalParam* a, const LocalParam* b) { return a->index < b->index; });
  const int DP = topology.data_parallel_size();
  for (LocalParam* p : local) {
    const collectives::Group g = holders(placement.params[p->index], topology);
    const int64_t numel = p->weight.numel();
    std::vector<std::pair<int64_t, at::Tensor>> all;
    if (g.size() == 1) {
      all = std::move(p->contributions);
    } else {
      // Every holder's contributions: their count, their slots (−1 pads), then their values, all
      // gathered in member order (exact copies; no arithmetic crosses ranks).
      const auto f64 = p->main_grad.options().dtype(at::kDouble);
      const int64_t mine = static_cast<int64_t>(p->contributions.size());
      const at::Tensor counts =
          comm.all_gather(g, at::full({1}, static_cast<double>(mine), f64), g.size()).cpu();
      const int64_t most = static_cast<int64_t>(counts.max().item<double>());
      at::Tensor slots = at::full({most}, -1.0, f64);
      at::Tensor values = at::zeros({most, numel}, p->main_grad.options());
      for (int64_t j = 0; j < mine; ++j) {
        slots[j].fill_(static_cast<double>(p->contributions[static_cast<size_t>(j)].first));
        values[j].copy_(p->contributions[static_cast<size_t>(j)].second.reshape({-1}));
      }
      const at::Tensor all_slots = comm.all_gather(g, slots, g.size() * most).cpu();
      const at::Tensor all_values = comm.all_gather(g, values.view({-1}), g.size() * most * numel)
                                        .view({g.size() * most, numel});
      for (int64_t i = 0; i < g.size() * most; ++i) {
        const double slot = all_slots[i].item<double>();
        if (slot >= 0) all.emplace_back(static_cast<int64_t>(slot), all_values[i]);
      }
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 1; i < all.size(); ++i) {
      MTP_INTERNAL_ASSERT(
          all[i].first != all[i - 1].first,
          fmt::format("{}: two holders gave contribution slot {}", p->name, all[i].first));
    }
    at::Tensor sum;
    for (const auto& [slot, c] : all) {
      if (!sum.defined()) {
        sum = c.reshape({-1}).clone();  // the first as it is (keeps a −0)
      } else {
        sum.add_(c.reshape({-1}));
      }
    }
    if (!sum.defined()) {
      p->main_grad.zero_();  // no microbatch reached the parameter
    } else {
      if (DP > 1) sum.mul_(1.0 / DP);  // Megatron's gradient_scaling_factor
      p->main_grad.copy_(sum.view(p->main_grad.sizes()));
    }
    p->contributions.clear();
  }
}

}  // namespace mtp::engine
