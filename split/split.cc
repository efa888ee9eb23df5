#include "split/split.h"

#include "harness/engine/chunk_support.h"
#include "harness/engine/standalone_chunk.h"

namespace mtp::split {
namespace {

/// Sequence multiple of the activation leaving `stage`: 1 before the first MTP stage, 1 + the
/// last depth held so far from it on (1 + D after the last MTP stage).
int64_t out_factor(const layout::PipelineLayout& layout, int stage) {
  int64_t depths = 0;
  for (int s = 0; s <= stage; ++s) {
    const auto& d = layout.stages[s].mtp_depths;
    if (!d.empty()) depths = d.back();
  }
  return 1 + depths;
}

class Split final : public engine::Implementation {
 public:
  config::Implementation kind() const override { return config::Implementation::kSplit; }
  void check_layout(const layout::PipelineLayout&) const override {}

  // Embedding copies on the first stage, every MTP stage and (tied) the loss stage; FLN with
  // decoder layer N; each MTP stage holds the parameters of its own depths only; the untied
  // output layer on the loss stage.
  std::vector<std::string> stage_param_names(const layout::PipelineLayout& layout, int stage,
                                             const config::ModelConfig& cfg) const override {
    return engine::standalone_param_names(layout, stage, cfg);
  }

  std::string describe_stage(const layout::PipelineLayout& layout, int stage,
                             const config::ModelConfig& cfg) const override {
    return engine::describe_standalone_stage(layout, stage, cfg, out_factor(layout, stage));
  }

  std::unique_ptr<engine::ModelChunk> build_chunk(const layout::PipelineLayout& layout, int stage,
                                                  const config::ModelConfig& cfg,
                                                  const engine::InitialWeights& init,
                                                  at::ScalarType dtype,
                                                  at::Device device) const override {
    return engine::make_standalone_chunk(
        layout, stage, cfg, stage_param_names(layout, stage, cfg), init, dtype, device,
        stage == 0 ? 0 : out_factor(layout, stage - 1), out_factor(layout, stage));
  }
};

}  // namespace

std::unique_ptr<engine::Implementation> make_split() { return std::make_unique<Split>(); }

}  // namespace mtp::split
