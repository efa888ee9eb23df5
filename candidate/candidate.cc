#include "candidate/candidate.h"

#include "harness/engine/chunk_support.h"
#include "harness/engine/standalone_chunk.h"

namespace mtp::candidate {
namespace {

/// Sequence multiple of the activation leaving `stage`: 1 + D from the MTP stage on.
int64_t out_factor(const layout::PipelineLayout& layout, int stage, int64_t D) {
  return (layout.mtp_stage >= 0 && stage >= layout.mtp_stage) ? 1 + D : 1;
}

class Candidate final : public engine::Implementation {
 public:
  config::Implementation kind() const override { return config::Implementation::kCandidate; }
  void check_layout(const layout::PipelineLayout&) const override {}

  // Embedding copies on the first stage, the MTP stage and (tied) the loss stage; FLN with
  // decoder layer N (StagePlan::owns_final_layernorm); the MTP depths on the MTP stage; the
  // untied output layer on the loss stage.
  std::vector<std::string> stage_param_names(const layout::PipelineLayout& layout, int stage,
                                             const config::ModelConfig& cfg) const override {
    return engine::standalone_param_names(layout, stage, cfg);
  }

  std::string describe_stage(const layout::PipelineLayout& layout, int stage,
                             const config::ModelConfig& cfg) const override {
    return engine::describe_standalone_stage(layout, stage, cfg,
                                             out_factor(layout, stage, cfg.mtp_num_layers));
  }

  std::unique_ptr<engine::ModelChunk> build_chunk(const layout::PipelineLayout& layout, int stage,
                                                  const config::ModelConfig& cfg,
                                                  const engine::InitialWeights& init,
                                                  at::ScalarType dtype,
                                                  at::Device device) const override {
    const int64_t D = cfg.mtp_num_layers;
    return engine::make_standalone_chunk(
        layout, stage, cfg, stage_param_names(layout, stage, cfg), init, dtype, device,
        stage == 0 ? 0 : out_factor(layout, stage - 1, D), out_factor(layout, stage, D));
  }
};

}  // namespace

std::unique_ptr<engine::Implementation> make_candidate() { return std::make_unique<Candidate>(); }

}  // namespace mtp::candidate
