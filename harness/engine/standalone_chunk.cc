#include "harness/engine/standalone_chunk.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/engine/chunk_support.h"
#include "harness/model/layer_nodes.h"
#include "harness/model/layers.h"
#include "harness/model/loss.h"
#include "harness/model/mtp.h"

namespace mtp::engine {
namespace {

class StandaloneChunk final : public ModelChunk {
 public:
  StandaloneChunk(const layout::PipelineLayout& layout, int stage, const config::ModelConfig& cfg,
                  const std::vector<std::string>& param_names, const InitialWeights& init,
                  at::ScalarType dtype, at::Device device, int64_t in_factor, int64_t out_factor,
                  const model::ParallelGroups& groups)
      : plan_(layout.stages[stage]),
        cfg_(cfg),
        is_loss_(stage == layout.num_stages() - 1),
        in_factor_(in_factor),
        out_factor_(out_factor),
        rope_(model::chunk_rope_tables(cfg, dtype, device, groups)) {
    add_initial_params(params_, init, param_names, dtype, device);
  }

  const layout::StagePlan& plan() const override { return plan_; }
  const model::ParamTable& params() const override { return params_; }
  std::vector<int64_t> input_shape() const override {
    return in_factor_ == 0 ? std::vector<int64_t>{} : hidden_shape(cfg_, in_factor_, rope_.cp);
  }
  std::vector<int64_t> output_shape() const override {
    return is_loss_ ? std::vector<int64_t>{} : hidden_shape(cfg_, out_factor_, rope_.cp);
  }

  std::unique_ptr<model::ChunkProgram> program(const at::Tensor& input, const MicrobatchTensors& mb,
                                               bool split) const override {
    auto prog = std::make_unique<model::ChunkProgram>(
        split, cfg_.accumulation == config::Accumulation::kCanonical);
    prog->input = input;
    const config::ModelConfig* cfgp = &cfg_;
    add_pre_process_node(*prog, plan_.is_first(), params_, cfg_, mb);
    // The trunk final norm runs in the last node of decoder layer N (Megatron: its callable).
    for (int layer : plan_.decoder_layers) {
      const bool fln = plan_.owns_final_layernorm && layer == plan_.decoder_layers.back();
      model::append_decoder_layer_nodes(
          *prog, layer, params_, cfg_, rope_,
          fln ? params_.get(config::kFinalLayernormName) : at::Tensor());
    }
    if (plan_.owns_final_layernorm && plan_.decoder_layers.empty()) {
      // Without MTP the final norm sits on the last stage, which may hold no decoder layer.
      at::Tensor fln = params_.get(config::kFinalLayernormName);
      prog->add(model::NodeKind::kFinalLayernorm, -1, [fln, cfgp](model::ChunkProgram& p) {
        p.hidden = model::norm(p.hidden, fln, *cfgp);
      });
    }
    if (!plan_.mtp_depths.empty()) {
      // An MTP stage: the hidden states so far and its depths' outputs leave concatenated.
      model::append_mtp_depth_nodes(*prog, mb.tokens,
                                    prog->embedding_use(params_.get(config::kWordEmbeddingName),
                                                        model::ChunkProgram::EmbeddingUse::kMtp),
                                    params_, cfg_, rope_, plan_.mtp_depths);
    }
    if (!is_loss_) return prog;
    // Loss stage: split [(1+D)s, b, H] into main + D chunks; one code path for every head.
    at::Tensor head = cfg_.untie_embeddings
                          ? params_.get(config::kOutputLayerName)
                          : prog->embedding_use(params_.get(config::kWordEmbeddingName),
                                                model::ChunkProgram::EmbeddingUse::kHead);
    add_post_process_node(*prog, head, cfg_, mb, LossHidden::kConcatSplit, rope_.cp);
    return prog;
  }

 private:
  const layout::StagePlan plan_;
  const config::ModelConfig cfg_;
  const bool is_loss_;
  const int64_t in_factor_, out_factor_;
  const model::RopeTables rope_;
  model::ParamTable params_;
};

/// Sequence multiple of the activation leaving `stage`: 1 + the last MTP depth held so far.
int64_t out_factor(const layout::PipelineLayout& layout, int stage) {
  int64_t depths = 0;
  for (int s = 0; s <= stage; ++s) {
    const auto& d = layout.stages[static_cast<size_t>(s)].mtp_depths;
    if (!d.empty()) depths = d.back();
  }
  return 1 + depths;
}

class StandaloneImplementation final : public Implementation {
 public:
  explicit StandaloneImplementation(config::Implementation kind) : kind_(kind) {}
  config::Implementation kind() const override { return kind_; }
  void check_layout(const layout::PipelineLayout&) const override {}
  std::vector<std::string> stage_param_names(const layout::PipelineLayout& layout, int stage,
                                             const config::ModelConfig& cfg) const override {
    return standalone_param_names(layout, stage, cfg);
  }
  std::string describe_stage(const layout::PipelineLayout& layout, int stage,
                             const config::ModelConfig& cfg) const override {
    return describe_standalone_stage(layout, stage, cfg, out_factor(layout, stage));
  }
  std::unique_ptr<ModelChunk> build_chunk(const layout::PipelineLayout& layout, int stage,
                                          const config::ModelConfig& cfg,
                                          const InitialWeights& init, at::ScalarType dtype,
                                          at::Device device,
                                          const model::ParallelGroups& groups) const override {
    return make_standalone_chunk(
        layout, stage, cfg, held_param_names(stage_param_names(layout, stage, cfg), groups), init,
        dtype, device, stage == 0 ? 0 : out_factor(layout, stage - 1), out_factor(layout, stage),
        groups);
  }

 private:
  const config::Implementation kind_;
};

}  // namespace

std::unique_ptr<Implementation> make_standalone_implementation(config::Implementation kind) {
  return std::make_unique<StandaloneImplementation>(kind);
}

std::unique_ptr<ModelChunk> make_standalone_chunk(
    const layout::PipelineLayout& layout, int stage, const config::ModelConfig& cfg,
    const std::vector<std::string>& param_names, const InitialWeights& init, at::ScalarType dtype,
    at::Device device, int64_t in_factor, int64_t out_factor, const model::ParallelGroups& groups) {
  return std::make_unique<StandaloneChunk>(layout, stage, cfg, param_names, init, dtype, device,
                                           in_factor, out_factor, groups);
}

std::vector<int> standalone_embedding_stages(const layout::PipelineLayout& layout,
                                             const config::ModelConfig& cfg) {
  std::vector<int> g{0};
  auto add = [&](int s) {
    if (s > g.back()) g.push_back(s);
  };
  for (int s : layout.mtp_stages) add(s);
  if (!cfg.untie_embeddings) add(layout.num_stages() - 1);
  return g;
}

std::vector<std::string> standalone_param_names(const layout::PipelineLayout& layout, int stage,
                                                const config::ModelConfig& cfg) {
  const auto& plan = layout.stages[stage];
  const auto group = standalone_embedding_stages(layout, cfg);
  std::vector<std::string> names;
  if (std::find(group.begin(), group.end(), stage) != group.end()) {
    names.push_back(config::kWordEmbeddingName);
  }
  for (auto& n : decoder_param_names(plan.decoder_layers, cfg)) names.push_back(n);
  if (plan.owns_final_layernorm) names.push_back(config::kFinalLayernormName);
  for (auto& n : mtp_param_names(cfg, plan.mtp_depths)) names.push_back(n);
  if (stage == layout.num_stages() - 1 && cfg.untie_embeddings) {
    names.push_back(config::kOutputLayerName);
  }
  return names;
}

std::string describe_standalone_stage(const layout::PipelineLayout& layout, int stage,
                                      const config::ModelConfig& cfg, int64_t out_factor) {
  const auto& plan = layout.stages[stage];
  const bool is_loss = stage == layout.num_stages() - 1;
  const auto group = standalone_embedding_stages(layout, cfg);
  const bool has_table = std::find(group.begin(), group.end(), stage) != group.end();
  std::vector<std::string> parts;
  if (plan.has_embedding) parts.push_back("E");
  if (has_table && !plan.has_embedding) parts.push_back("(embedding copy)");
  if (!plan.decoder_layers.empty()) parts.push_back(format_layer_ranges(plan.decoder_layers, "t"));
  if (plan.owns_final_layernorm) parts.push_back("FLN");
  if (!plan.mtp_depths.empty()) {
    parts.push_back(fmt::format("m{}-{}", plan.mtp_depths.front(), plan.mtp_depths.back()));
  }
  if (is_loss) parts.push_back("L");
  if (parts.empty()) parts.push_back("(pass-through)");
  std::string out = fmt::format("{}", fmt::join(parts, " "));
  if (!is_loss)
    out += fmt::format(" -> [{}]", fmt::join(hidden_shape(cfg, out_factor, nullptr), ", "));
  return out;
}

}  // namespace mtp::engine
