#include "harness/engine/chunk.h"

#include <algorithm>

namespace mtp::engine {

ChunkOutput ModelChunk::forward(const at::Tensor& input, const MicrobatchTensors& mb) const {
  auto prog = program(input, mb, /*split=*/false);
  prog->forward_all();
  ChunkOutput out;
  if (plan().has_loss) {
    out.objective = prog->result;
    out.lm = prog->lm_value();
    out.mtp = prog->mtp_values();
  } else {
    out.activation = prog->result;
  }
  return out;
}

std::vector<int> Implementation::embedding_group(const layout::PipelineLayout& layout,
                                                 const config::ModelConfig& cfg) const {
  std::vector<int> stages;
  for (int i = 0; i < layout.num_stages(); ++i) {
    const auto names = stage_param_names(layout, i, cfg);
    if (std::find(names.begin(), names.end(), config::kWordEmbeddingName) != names.end()) {
      stages.push_back(i);
    }
  }
  return stages;
}

std::vector<std::unique_ptr<ModelChunk>> Implementation::build_chunks(
    const layout::PipelineLayout& layout, const config::ModelConfig& cfg,
    const InitialWeights& init, at::ScalarType dtype, at::Device device) const {
  std::vector<std::unique_ptr<ModelChunk>> chunks;
  for (int i = 0; i < layout.num_stages(); ++i) {
    chunks.push_back(build_chunk(layout, i, cfg, init, dtype, device, {}));
  }
  return chunks;
}

}  // namespace mtp::engine
