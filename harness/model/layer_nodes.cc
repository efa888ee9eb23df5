#include "harness/model/layer_nodes.h"

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "harness/config/param_specs.h"
#include "harness/model/fan_out.h"
#include "harness/model/moe.h"
#include "harness/model/mtp.h"

namespace mtp::model {
namespace {

/// Cross-node state of one transformer layer.
struct LayerState {
  LayerWeights w;
  at::Tensor residual;  // h after attention (+ residual)
  at::Tensor shared;    // shared expert output
  at::Tensor gates;     // router gates (differentiable)
  RoutingPlan plan;     // assignments and permutation (gates replaced by the cut copy)
  ExpertCounts counts;  // expert parallel: every EP member's rows per expert
};

/// Appends the nodes of one transformer layer whose weights are under `prefix`. `pre` runs at
/// the start of the attn node (MTP preprocessing) and returns the layer input; `post` runs at the
/// end of the layer's last node.
void append_layer(ChunkProgram& prog, int layer, const std::string& prefix, bool is_moe,
                  const ParamTable& params, const config::ModelConfig& cfg, const RopeTables& rope,
                  std::function<at::Tensor(ChunkProgram&)> pre,
                  std::function<at::Tensor(ChunkProgram&, const at::Tensor&)> post) {
  auto st = std::make_shared<LayerState>();
  ExpertParallel* ep = rope.ep != nullptr && rope.ep->size() > 1 ? rope.ep : nullptr;
  st->w = LayerWeights::from(params, prefix, cfg, is_moe, ep);
  const config::ModelConfig* c = &cfg;
  const RopeTables* r = &rope;
  auto attention = [st, c, r](const at::Tensor& x) {
    return x + self_attention(norm(x, st->w.input_layernorm, *c), st->w, *c, *r);
  };
  if (!is_moe) {
    prog.add(NodeKind::kAttention, layer, [st, pre, attention](ChunkProgram& p) {
      p.hidden = attention(pre ? pre(p) : p.hidden);
    });
    prog.add(NodeKind::kMlp, layer, [st, post, c](ChunkProgram& p) {
      at::Tensor h = p.hidden;
      h = h + swiglu_mlp(norm(h, st->w.pre_mlp_layernorm, *c), st->w, *c);
      p.hidden = post ? post(p, h) : h;
    });
    return;
  }
  prog.add(NodeKind::kAttention, layer, [st, pre, attention, c](ChunkProgram& p) {
    at::Tensor h = attention(pre ? pre(p) : p.hidden);
    const MoeWeights& moe = *st->w.moe;
    // The normed input's three readers get their gradients summed in the order one autograd
    // thread adds them (dispatch, router, shared expert), also when the dispatch's all-to-all
    // runs its backward on another thread (fan_out.h).
    const std::vector<at::Tensor> x2 =
        fan_out(norm(h, st->w.pre_mlp_layernorm, *c), moe.shared_expert ? 3 : 2);
    st->residual = p.cut(h);
    if (moe.shared_expert) {
      st->shared = p.cut(shared_expert_forward(x2[2], *moe.shared_expert, c->kernels));
    }
    st->plan = route(x2[1], moe.router, *c);
    st->gates = p.cut(st->plan.gates);
    st->plan.gates = st->gates;
    p.hidden = dispatch(x2[0], st->plan);  // "dispatch preprocess": permute in the attn node
  });
  prog.add(NodeKind::kDispatch, layer, [st, ep](ChunkProgram& p) {
    if (ep == nullptr) {
      p.hidden = p.hidden.clone();  // all-to-all over one expert-parallel rank: a copy
      return;
    }
    st->counts = ep->exchange_counts(st->plan.permutation.tokens_per_expert, p.hidden.device());
    p.hidden = ep->dispatch(p.hidden, st->counts);  // [R, H]: this rank's experts' rows
  });
  prog.add(NodeKind::kMlp, layer, [st, ep, c](ChunkProgram& p) {
    p.hidden = experts_forward(
        p.hidden, ep ? ep->local_rows(st->counts) : st->plan.permutation.tokens_per_expert,
        st->w.moe->experts, c->kernels);
  });
  prog.add(NodeKind::kCombine, layer, [st, post, ep](ChunkProgram& p) {
    at::Tensor h = st->residual;
    const at::Tensor expert_out = ep ? ep->combine(p.hidden, st->counts) : p.hidden;
    st->counts = ExpertCounts();
    at::Tensor moe_out = combine(expert_out, st->plan, st->shared).view(h.sizes());
    h = h + moe_out;
    st->residual = at::Tensor();
    st->shared = at::Tensor();
    p.hidden = post ? post(p, h) : h;
  });
}

}  // namespace

void append_decoder_layer_nodes(ChunkProgram& prog, int layer, const ParamTable& params,
                                const config::ModelConfig& cfg, const RopeTables& rope,
                                const at::Tensor& final_norm) {
  std::function<at::Tensor(ChunkProgram&, const at::Tensor&)> post;
  if (final_norm.defined()) {
    const config::ModelConfig* c = &cfg;
    at::Tensor w = final_norm;
    post = [w, c](ChunkProgram&, const at::Tensor& h) { return norm(h, w, *c); };
  }
  append_layer(prog, layer, fmt::format("decoder.layers.{}.", layer), cfg.is_moe_layer(layer),
               params, cfg, rope, nullptr, post);
}

namespace {

void append_depths(ChunkProgram& prog, const at::Tensor& tokens, const at::Tensor& table,
                   const ParamTable& params, const config::ModelConfig& cfg, const RopeTables& rope,
                   const std::vector<int>& depths, bool concat) {
  MTP_INTERNAL_ASSERT(!depths.empty(), "append_depths needs at least one depth");
  auto ids = std::make_shared<at::Tensor>(tokens);
  const int first = depths.front();
  if (first > 1) {
    // candidate/split/: the stage receives cat(h0, …, h_{first−1}); depth `first` continues from
    // the last.
    ContextParallel* cp = rope.cp;
    prog.add(NodeKind::kPreProcess, -1, [ids, first, cp](ChunkProgram& prog_) {
      prog_.mtp_hidden = prog_.hidden.split(ids->size(1), 0);  // this rank's s (CP: s/CP)
      prog_.hidden = prog_.mtp_hidden.back();
      for (int r = 1; r < first; ++r) *ids = roll_sequence_left(*ids, cp);
    });
  }
  for (int depth : depths) {
    const int64_t k = depth - 1;
    const config::MtpLayerNames names = config::mtp_layer_names(k);
    at::Tensor enorm = params.get(names.enorm);
    at::Tensor hnorm = params.get(names.hnorm);
    at::Tensor eh_proj = params.get(names.eh_proj);
    at::Tensor final_norm = params.get(names.final_layernorm);
    const config::ModelConfig* c = &cfg;
    ContextParallel* cp = rope.cp;
    auto pre = [ids, table, enorm, hnorm, eh_proj, c, cp](ChunkProgram& prog_) {
      if (prog_.mtp_hidden.empty()) prog_.mtp_hidden.push_back(prog_.hidden);  // h0
      *ids = roll_sequence_left(*ids, cp);
      at::Tensor e = embed(*ids, table, *c);
      at::Tensor z = at::cat({norm(e, enorm, *c), norm(prog_.hidden, hnorm, *c)}, -1);
      return linear_no_bias(z, eh_proj);
    };
    const int layer = static_cast<int>(cfg.num_layers + k);
    append_layer(prog, layer, names.transformer_layer, cfg.mtp_layer_is_moe(), params, cfg, rope,
                 pre, nullptr);
    const bool last = depth == depths.back();
    prog.add(NodeKind::kMtpPost, layer, [final_norm, c, last, concat](ChunkProgram& prog_) {
      at::Tensor h = norm(prog_.hidden, final_norm, *c);
      prog_.mtp_hidden.push_back(h);
      prog_.hidden = (last && concat) ? at::cat(prog_.mtp_hidden, 0) : h;
    });
  }
}

}  // namespace

void append_mtp_nodes(ChunkProgram& prog, const at::Tensor& tokens, const at::Tensor& table,
                      const ParamTable& params, const config::ModelConfig& cfg,
                      const RopeTables& rope, bool concat) {
  std::vector<int> all(static_cast<size_t>(cfg.mtp_num_layers));
  for (size_t k = 0; k < all.size(); ++k) all[k] = static_cast<int>(k + 1);
  append_depths(prog, tokens, table, params, cfg, rope, all, concat);
}

void append_mtp_depth_nodes(ChunkProgram& prog, const at::Tensor& tokens, const at::Tensor& table,
                            const ParamTable& params, const config::ModelConfig& cfg,
                            const RopeTables& rope, const std::vector<int>& depths) {
  append_depths(prog, tokens, table, params, cfg, rope, depths, /*concat=*/true);
}

}  // namespace mtp::model
