#include "harness/engine/placement.h"

#include <fmt/format.h>

#include <map>

#include "harness/common/error.h"
#include "harness/model/params.h"
#include "harness/record/schema.h"

namespace mtp::engine {

size_t ParamPlacement::index_of(const std::string& name) const {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return i;
  }
  throw InternalError(fmt::format("no parameter named {}", name));
}

ParamPlacement place_params(const Implementation& impl, const layout::PipelineLayout& layout,
                            const config::ModelConfig& cfg) {
  ParamPlacement out;
  std::map<std::string, size_t> index;
  for (const auto& spec : config::parameter_specs(cfg)) {
    index[spec.name] = out.params.size();
    out.params.push_back({spec.name, spec.shape, {}});
  }
  for (int stage = 0; stage < layout.num_stages(); ++stage) {
    for (const auto& name : impl.stage_param_names(layout, stage, cfg)) {
      auto it = index.find(name);
      MTP_INTERNAL_ASSERT(it != index.end(),
                          fmt::format("stage {} holds unknown parameter {}", stage, name));
      out.params[it->second].stages.push_back(stage);
    }
  }
  for (const auto& p : out.params) {
    MTP_INTERNAL_ASSERT(!p.stages.empty(), fmt::format("no stage holds parameter {}", p.name));
    MTP_INTERNAL_ASSERT(p.stages.size() == 1 || p.name == config::kWordEmbeddingName,
                        fmt::format("{} has {} copies", p.name, p.stages.size()));
    if (p.stages.size() > 1) out.embedding_group = p.stages;
  }
  return out;
}

std::vector<ParamCopy> param_copies(const ParamPlacement& placement, int data_parallel_size) {
  std::vector<ParamCopy> out;
  for (size_t i = 0; i < placement.params.size(); ++i) {
    const PlacedParam& p = placement.params[i];
    for (int d = 0; d < data_parallel_size; ++d) {
      for (int stage : p.stages) {
        if (d == 0 && stage == p.stages.front()) continue;  // the recorded copy
        out.push_back({i, d, stage, record::copy_name(p.name, d, stage)});
      }
    }
  }
  return out;
}

}  // namespace mtp::engine
