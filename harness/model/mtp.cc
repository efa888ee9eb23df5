#include "harness/model/mtp.h"

#include "harness/config/param_specs.h"

namespace mtp::model {

at::Tensor roll_left(const at::Tensor& t) {
  const int64_t s = t.size(-1);
  auto tail = at::zeros_like(t.narrow(-1, 0, 1));
  return at::cat({t.narrow(-1, 1, s - 1), tail}, -1);
}

at::Tensor roll_sequence_left(const at::Tensor& t, ContextParallel* cp) {
  return cp != nullptr && cp->size() > 1 ? cp->roll_left(t) : roll_left(t);
}

std::vector<at::Tensor> mtp_block_forward(const at::Tensor& h0, const at::Tensor& tokens,
                                          const at::Tensor& embedding_table,
                                          const ParamTable& params, const config::ModelConfig& cfg,
                                          const RopeTables& rope) {
  std::vector<at::Tensor> out;
  at::Tensor ids = tokens;
  at::Tensor h = h0;
  for (int64_t k = 0; k < cfg.mtp_num_layers; ++k) {
    const config::MtpLayerNames n = config::mtp_layer_names(k);
    ids = roll_sequence_left(ids, rope.cp);
    auto e = embed(ids, embedding_table, cfg);
    auto z = at::cat({norm(e, params.get(n.enorm), cfg), norm(h, params.get(n.hnorm), cfg)}, -1);
    auto x = linear_no_bias(z, params.get(n.eh_proj));
    auto w = LayerWeights::from(params, n.transformer_layer, cfg, cfg.mtp_layer_is_moe());
    auto y = transformer_layer(x, w, cfg, rope);
    h = norm(y, params.get(n.final_layernorm), cfg);
    out.push_back(h);
  }
  return out;
}

}  // namespace mtp::model
