#include "harness/engine/chunk_support.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/config/param_specs.h"
#include "harness/model/layers.h"
#include "harness/model/loss.h"

namespace mtp::engine {

void add_initial_params(model::ParamTable& table, const InitialWeights& init,
                        const std::vector<std::string>& names, at::ScalarType dtype,
                        at::Device device) {
  for (const auto& n : names) {
    table.add(n, init.get(n).to(dtype).to(device).clone().set_requires_grad(true));
  }
}

std::vector<std::string> decoder_param_names(const std::vector<int>& layers,
                                             const config::ModelConfig& cfg) {
  std::vector<std::string> names;
  for (int i : layers) {
    for (auto& n :
         config::layer_param_names(fmt::format("decoder.layers.{}.", i), cfg, cfg.is_moe_layer(i)))
      names.push_back(n);
  }
  return names;
}

std::vector<std::string> mtp_param_names(const config::ModelConfig& cfg) {
  std::vector<int> all;
  for (int k = 1; k <= static_cast<int>(cfg.mtp_num_layers); ++k) all.push_back(k);
  return mtp_param_names(cfg, all);
}

std::vector<std::string> mtp_param_names(const config::ModelConfig& cfg,
                                         const std::vector<int>& depths) {
  std::vector<std::string> names;
  for (int depth : depths) {
    const config::MtpLayerNames m = config::mtp_layer_names(depth - 1);
    names.push_back(m.enorm);
    names.push_back(m.hnorm);
    names.push_back(m.eh_proj);
    for (auto& n : config::layer_param_names(m.transformer_layer, cfg, cfg.mtp_layer_is_moe())) {
      names.push_back(n);
    }
    names.push_back(m.final_layernorm);
  }
  return names;
}

std::string format_layer_ranges(const std::vector<int>& layers, const char* prefix) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    parts.push_back(j == i ? fmt::format("{}{}", prefix, layers[i])
                           : fmt::format("{}{}-{}", prefix, layers[i], layers[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

void add_pre_process_node(model::ChunkProgram& prog, bool first_stage,
                          const model::ParamTable& params, const config::ModelConfig& cfg,
                          const MicrobatchTensors& mb) {
  const config::ModelConfig* c = &cfg;
  at::Tensor tokens = mb.tokens;
  // The input embedding's use of the table (its own leaf under canonical accumulation).
  const at::Tensor table = first_stage
                               ? prog.embedding_use(params.get(config::kWordEmbeddingName),
                                                    model::ChunkProgram::EmbeddingUse::kInput)
                               : at::Tensor();
  prog.add(model::NodeKind::kPreProcess, -1,
           [first_stage, table, c, tokens](model::ChunkProgram& p) {
             p.hidden = first_stage ? model::embed(tokens, table, *c) : p.input;
           });
}

void add_post_process_node(model::ChunkProgram& prog, const at::Tensor& head,
                           const config::ModelConfig& cfg, const MicrobatchTensors& mb,
                           LossHidden source, model::ContextParallel* cp) {
  const config::ModelConfig* c = &cfg;
  model::LossInputs in{mb.labels,           mb.loss_mask, mb.token_counts,
                       mb.mtp_ratio_counts, cp,           mb.sequence_token_counts};
  const int64_t m = mb.num_microbatches;
  prog.add(model::NodeKind::kPostProcess, -1, [head, c, in, m, source](model::ChunkProgram& p) {
    std::vector<at::Tensor> hidden;
    if (source == LossHidden::kConcatSplit) {
      hidden = p.hidden.split(in.labels.size(1), 0);  // this rank's s (CP: s/CP)
    } else {
      hidden = p.mtp_hidden;
      if (hidden.empty()) hidden.push_back(p.hidden);
    }
    auto loss = model::loss_stage_forward(hidden, head, in, *c, m);
    p.result = loss.objective;
    p.lm = loss.lm;
    p.mtp = loss.mtp;
  });
}

std::vector<int64_t> hidden_shape(const config::ModelConfig& cfg, int64_t factor,
                                  const model::ContextParallel* cp) {
  const int64_t s = cfg.seq_length / (cp != nullptr ? cp->size() : 1);
  return {s * factor, cfg.micro_batch_size, cfg.hidden_size};
}

std::vector<std::string> held_param_names(std::vector<std::string> names,
                                          const model::ParallelGroups& groups) {
  const model::ExpertParallel* ep = groups.ep;
  if (ep == nullptr || ep->size() == 1) return names;
  names.erase(std::remove_if(names.begin(), names.end(),
                             [ep](const std::string& n) {
                               const int64_t e = config::routed_expert_index(n);
                               return e >= 0 && !ep->holds(e);
                             }),
              names.end());
  return names;
}

}  // namespace mtp::engine
