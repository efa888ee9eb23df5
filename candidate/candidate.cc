#include "candidate/candidate.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/engine/chunk_support.h"
#include "harness/model/layer_nodes.h"
#include "harness/model/layers.h"
#include "harness/model/loss.h"
#include "harness/model/mtp.h"

namespace mtp::candidate {
namespace {

using engine::ChunkOutput;
using engine::MicrobatchTensors;

/// Sequence multiple of the activation leaving `stage`: 1 + D from the MTP stage on.
int64_t out_factor(const layout::PipelineLayout& layout, int stage, int64_t D) {
  return (layout.mtp_stage >= 0 && stage >= layout.mtp_stage) ? 1 + D : 1;
}

/// Stages holding a word-embedding copy: first, MTP stage, last if tied (ascending, unique).
std::vector<int> embedding_stages(const layout::PipelineLayout& layout,
                                  const model::ModelConfig& cfg) {
  std::vector<int> g{0};
  auto add = [&](int s) {
    if (s > g.back()) g.push_back(s);
  };
  if (layout.mtp_stage >= 0) add(layout.mtp_stage);
  if (!cfg.untie_embeddings) add(layout.num_stages() - 1);
  return g;
}

/// One stage of the standalone design.
class CandidateChunk final : public engine::ModelChunk {
 public:
  CandidateChunk(const layout::PipelineLayout& layout, int stage, const model::ModelConfig& cfg,
                 const engine::InitialWeights& init, at::ScalarType dtype,
                 at::Device device)
      : plan_(layout.stages[stage]), cfg_(cfg),
        is_loss_(stage == layout.num_stages() - 1),
        in_factor_(stage == 0 ? 0 : out_factor(layout, stage - 1, cfg.mtp_num_layers)),
        out_factor_(out_factor(layout, stage, cfg.mtp_num_layers)),
        rope_(model::rope_tables(cfg.seq_length, cfg.kv_channels(), cfg.rotary_base, dtype, device)) {
    const auto group = embedding_stages(layout, cfg);
    has_table_ = std::find(group.begin(), group.end(), stage) != group.end();
    if (has_table_) engine::add_initial_params(params_, init, {model::kWordEmbeddingName}, dtype, device);
    engine::add_initial_params(params_, init, engine::decoder_param_names(plan_.decoder_layers, cfg),
                               dtype, device);
    if (plan_.owns_final_layernorm) {
      engine::add_initial_params(params_, init, {model::kFinalLayernormName}, dtype, device);
    }
    if (!plan_.mtp_depths.empty()) {
      engine::add_initial_params(params_, init, engine::mtp_param_names(cfg), dtype, device);
    }
    if (is_loss_ && cfg.untie_embeddings) {
      engine::add_initial_params(params_, init, {model::kOutputLayerName}, dtype, device);
    }
  }

  const layout::StagePlan& plan() const override { return plan_; }
  const model::ParamTable& params() const override { return params_; }
  std::vector<int64_t> input_shape() const override {
    return in_factor_ == 0 ? std::vector<int64_t>{} : engine::hidden_shape(cfg_, in_factor_);
  }
  std::vector<int64_t> output_shape() const override {
    return is_loss_ ? std::vector<int64_t>{} : engine::hidden_shape(cfg_, out_factor_);
  }

  std::unique_ptr<model::ChunkProgram> program(const at::Tensor& input,
                                               const MicrobatchTensors& mb,
                                               bool split) const override {
    auto prog = std::make_unique<model::ChunkProgram>(split);
    prog->input = input;
    const model::ModelConfig* cfgp = &cfg_;
    at::Tensor tokens = mb.tokens;
    engine::add_pre_process_node(*prog, plan_.is_first(), params_, cfg_, mb);
    // The trunk final norm runs in the last node of decoder layer N (Megatron: its callable).
    for (int layer : plan_.decoder_layers) {
      const bool fln = plan_.owns_final_layernorm && layer == plan_.decoder_layers.back();
      model::append_decoder_layer_nodes(
          *prog, layer, params_, cfg_, rope_,
          fln ? params_.get(model::kFinalLayernormName) : at::Tensor());
    }
    if (plan_.owns_final_layernorm && plan_.decoder_layers.empty()) {
      // Without MTP the final norm sits on the last stage, which may hold no decoder layer.
      at::Tensor fln = params_.get(model::kFinalLayernormName);
      prog->add("final_layernorm", -1, [fln, cfgp](model::ChunkProgram& p) {
        p.hidden = model::norm(p.hidden, fln, *cfgp);
      });
    }
    if (!plan_.mtp_depths.empty()) {
      // MTP stage: h0 and the depths' outputs leave concatenated along the sequence.
      model::append_mtp_nodes(*prog, tokens, params_.get(model::kWordEmbeddingName), params_, cfg_,
                              rope_, /*concat=*/true);
    }
    if (!is_loss_) return prog;
    // Loss stage: split [(1+D)s, b, H] into main + D chunks; one code path for every head.
    at::Tensor head = params_.get(cfg_.untie_embeddings ? model::kOutputLayerName
                                                        : model::kWordEmbeddingName);
    engine::add_post_process_node(*prog, head, cfg_, mb, engine::LossHidden::kConcatSplit);
    return prog;
  }

  std::string describe() const override {
    std::vector<std::string> parts;
    if (plan_.has_embedding) parts.push_back("E");
    if (has_table_ && !plan_.has_embedding) parts.push_back("(embedding copy)");
    if (!plan_.decoder_layers.empty()) parts.push_back(engine::format_layer_ranges(plan_.decoder_layers, "t"));
    if (plan_.owns_final_layernorm) parts.push_back("FLN");
    if (!plan_.mtp_depths.empty()) parts.push_back(fmt::format("m1-{}", cfg_.mtp_num_layers));
    if (is_loss_) parts.push_back("L");
    if (parts.empty()) parts.push_back("(pass-through)");
    std::string out = fmt::format("{}", fmt::join(parts, " "));
    if (!is_loss_) out += fmt::format(" -> [{}]", fmt::join(output_shape(), ", "));
    return out;
  }


 private:
  const layout::StagePlan plan_;
  const model::ModelConfig cfg_;
  const bool is_loss_;
  const int64_t in_factor_, out_factor_;
  const model::RopeTables rope_;
  model::ParamTable params_;
  bool has_table_ = false;
};

class Candidate final : public engine::Implementation {
 public:
  std::string name() const override { return "candidate"; }
  void check_layout(const layout::PipelineLayout&) const override {}
  std::vector<int> embedding_group(const layout::PipelineLayout& layout,
                                   const model::ModelConfig& cfg) const override {
    return embedding_stages(layout, cfg);
  }
  std::vector<std::unique_ptr<engine::ModelChunk>> build_chunks(
      const layout::PipelineLayout& layout, const model::ModelConfig& cfg,
      const engine::InitialWeights& init, at::ScalarType dtype,
      at::Device device) const override {
    std::vector<std::unique_ptr<engine::ModelChunk>> chunks;
    for (int i = 0; i < layout.num_stages(); ++i) {
      chunks.push_back(std::make_unique<CandidateChunk>(layout, i, cfg, init, dtype, device));
    }
    return chunks;
  }
};

}  // namespace

std::unique_ptr<engine::Implementation> make_candidate() { return std::make_unique<Candidate>(); }

}  // namespace mtp::candidate
