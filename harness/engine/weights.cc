#include <fmt/format.h>

#include "harness/common/error.h"
#include "harness/engine/chunk.h"

namespace mtp::engine {

const at::Tensor& InitialWeights::get(const std::string& name) const {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return values[i];
  }
  throw InternalError(fmt::format("no initial weight named {}", name));
}

InitialWeights make_initial_weights(const config::ModelConfig& cfg, uint64_t seed) {
  InitialWeights w;
  w.specs = config::parameter_specs(cfg);
  for (const auto& s : w.specs) w.values.push_back(model::initial_value(s, seed));
  return w;
}

}  // namespace mtp::engine
