#include "harness/model/mtp.h"

#include <fmt/format.h>

namespace mtp::model {

at::Tensor roll_left(const at::Tensor& t) {
  const int64_t s = t.size(-1);
  auto tail = at::zeros_like(t.narrow(-1, 0, 1));
  return at::cat({t.narrow(-1, 1, s - 1), tail}, -1);
}

std::vector<at::Tensor> mtp_block_forward(const at::Tensor& h0, const at::Tensor& tokens,
                                          const at::Tensor& embedding_table,
                                          const ParamTable& params, const config::ModelConfig& cfg,
                                          const RopeTables& rope) {
  std::vector<at::Tensor> out;
  at::Tensor ids = tokens;
  at::Tensor h = h0;
  for (int64_t k = 0; k < cfg.mtp_num_layers; ++k) {
    const std::string p = fmt::format("mtp.layers.{}.", k);
    ids = roll_left(ids);
    auto e = embed(ids, embedding_table, cfg);
    auto z = at::cat({norm(e, params.get(p + "enorm.weight"), cfg),
                      norm(h, params.get(p + "hnorm.weight"), cfg)}, -1);
    auto x = linear_no_bias(z, params.get(p + "eh_proj.weight"));
    auto w = LayerWeights::from(params, p + "transformer_layer.", cfg, cfg.mtp_layer_is_moe());
    auto y = transformer_layer(x, w, cfg, rope);
    h = norm(y, params.get(p + "final_layernorm.weight"), cfg);
    out.push_back(h);
  }
  return out;
}

}  // namespace mtp::model
