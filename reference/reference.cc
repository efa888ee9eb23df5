#include "reference/reference.h"

#include <fmt/format.h>

#include "harness/engine/chunk_support.h"
#include "harness/model/layer_nodes.h"
#include "harness/model/layers.h"
#include "harness/model/loss.h"
#include "harness/model/mtp.h"

namespace mtp::reference {
namespace {

using engine::MicrobatchTensors;

/// One stage of the co-located design.
class ReferenceChunk final : public engine::ModelChunk {
 public:
  ReferenceChunk(const layout::PipelineLayout& layout, int stage, const config::ModelConfig& cfg,
                 const std::vector<std::string>& param_names, const engine::InitialWeights& init,
                 at::ScalarType dtype, at::Device device, const model::ParallelGroups& groups)
      : plan_(layout.stages[stage]),
        cfg_(cfg),
        is_loss_(stage == layout.num_stages() - 1),
        rope_(model::chunk_rope_tables(cfg, dtype, device, groups)) {
    engine::add_initial_params(params_, init, param_names, dtype, device);
  }

  const layout::StagePlan& plan() const override { return plan_; }
  const model::ParamTable& params() const override { return params_; }
  std::vector<int64_t> input_shape() const override {
    return plan_.is_first() ? std::vector<int64_t>{} : engine::hidden_shape(cfg_, 1, rope_.cp);
  }
  std::vector<int64_t> output_shape() const override {
    return is_loss_ ? std::vector<int64_t>{} : engine::hidden_shape(cfg_, 1, rope_.cp);
  }

  std::unique_ptr<model::ChunkProgram> program(const at::Tensor& input, const MicrobatchTensors& mb,
                                               bool split) const override {
    auto prog = std::make_unique<model::ChunkProgram>(
        split, cfg_.accumulation == config::Accumulation::kCanonical);
    prog->input = input;
    const config::ModelConfig* cfgp = &cfg_;
    at::Tensor tokens = mb.tokens;
    engine::add_pre_process_node(*prog, plan_.is_first(), params_, cfg_, mb);
    for (int layer : plan_.decoder_layers) {
      model::append_decoder_layer_nodes(*prog, layer, params_, cfg_, rope_, at::Tensor());
    }
    if (!is_loss_) return prog;
    // Loss stage: the trunk final norm, every MTP depth, then the heads and losses.
    at::Tensor fln = params_.get(config::kFinalLayernormName);
    prog->add(model::NodeKind::kFinalLayernorm, -1, [fln, cfgp](model::ChunkProgram& p) {
      p.hidden = model::norm(p.hidden, fln, *cfgp);
    });
    if (cfg_.mtp_num_layers > 0) {
      model::append_mtp_nodes(*prog, tokens,
                              prog->embedding_use(params_.get(config::kWordEmbeddingName),
                                                  model::ChunkProgram::EmbeddingUse::kMtp),
                              params_, cfg_, rope_, /*concat=*/false);
    }
    at::Tensor head = cfg_.untie_embeddings
                          ? params_.get(config::kOutputLayerName)
                          : prog->embedding_use(params_.get(config::kWordEmbeddingName),
                                                model::ChunkProgram::EmbeddingUse::kHead);
    engine::add_post_process_node(*prog, head, cfg_, mb, engine::LossHidden::kMtpList, rope_.cp);
    return prog;
  }

 private:
  const layout::StagePlan plan_;
  const config::ModelConfig cfg_;
  const bool is_loss_;
  const model::RopeTables rope_;
  model::ParamTable params_;
};

class Reference final : public engine::Implementation {
 public:
  config::Implementation kind() const override { return config::Implementation::kReference; }

  void check_layout(const layout::PipelineLayout& layout) const override {
    if (layout.mtp_stage >= 0 && layout.mtp_stage != layout.num_stages() - 1) {
      const auto& s = layout.stages[layout.mtp_stage];
      throw InputError(fmt::format(
          "reference implementation: layout \"{}\" places MTP in stage {} (pipeline rank {}, "
          "virtual stage {}), not in the loss stage {}; the reference runs MTP co-located with "
          "the loss only (use implementation = \"candidate\" for standalone MTP)",
          layout.text, s.stage_index, s.pipeline_rank, s.virtual_stage, layout.num_stages() - 1));
    }
  }

  // The loss stage holds the trunk final norm, every MTP depth, and an embedding copy when MTP
  // or a tied head reads it; the first stage holds the table.
  std::vector<std::string> stage_param_names(const layout::PipelineLayout& layout, int stage,
                                             const config::ModelConfig& cfg) const override {
    const auto& plan = layout.stages[stage];
    const bool is_loss = stage == layout.num_stages() - 1;
    std::vector<std::string> names;
    if (plan.is_first() || (is_loss && (cfg.mtp_num_layers > 0 || !cfg.untie_embeddings))) {
      names.push_back(config::kWordEmbeddingName);
    }
    for (auto& n : engine::decoder_param_names(plan.decoder_layers, cfg)) names.push_back(n);
    if (is_loss) {
      names.push_back(config::kFinalLayernormName);
      for (auto& n : engine::mtp_param_names(cfg)) names.push_back(n);
      if (cfg.untie_embeddings) names.push_back(config::kOutputLayerName);
    }
    return names;
  }

  std::string describe_stage(const layout::PipelineLayout& layout, int stage,
                             const config::ModelConfig& cfg) const override {
    const auto& plan = layout.stages[stage];
    const bool is_loss = stage == layout.num_stages() - 1;
    std::vector<std::string> parts;
    if (plan.has_embedding) parts.push_back("E");
    if (!plan.decoder_layers.empty()) {
      parts.push_back(engine::format_layer_ranges(plan.decoder_layers, "t"));
    }
    if (is_loss) {
      parts.push_back("FLN");
      if (cfg.mtp_num_layers > 0) {
        parts.push_back(fmt::format("m1-{} (embedding copy)", cfg.mtp_num_layers));
      }
      parts.push_back("L");
    }
    if (parts.empty()) parts.push_back("(empty)");
    return fmt::format("{}", fmt::join(parts, " "));
  }

  std::unique_ptr<engine::ModelChunk> build_chunk(
      const layout::PipelineLayout& layout, int stage, const config::ModelConfig& cfg,
      const engine::InitialWeights& init, at::ScalarType dtype, at::Device device,
      const model::ParallelGroups& groups) const override {
    check_layout(layout);
    return std::make_unique<ReferenceChunk>(
        layout, stage, cfg, engine::held_param_names(stage_param_names(layout, stage, cfg), groups),
        init, dtype, device, groups);
  }
};

}  // namespace

std::unique_ptr<engine::Implementation> make_reference() { return std::make_unique<Reference>(); }

}  // namespace mtp::reference
