#include "harness/sim/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "harness/common/error.h"
#include "harness/sim/activation.h"

namespace mtp::sim {

SimulationPlan plan_simulation(const config::ModelConfig& model, const std::string& layout_text,
                               int pipeline_size, int num_microbatches,
                               const std::string& schedule_name, int group_size, bool split) {
  SimulationPlan p;
  p.layout = layout::build_layout(layout_text, pipeline_size, static_cast<int>(model.num_layers),
                                  static_cast<int>(model.mtp_num_layers),
                                  split ? layout::MtpRule::kSplit : layout::MtpRule::kOneStage);
  const int64_t ops = int64_t{2} * p.layout.num_stages() * num_microbatches;
  if (ops > kMaxSimulatedOps) {
    throw InputError(fmt::format(
        "{} stages and M = {} make {} ops (a forward and a backward per stage and microbatch); "
        "one simulation plays at most {} (~2.4 GB): simulate fewer microbatches or stages",
        p.layout.num_stages(), num_microbatches, ops, kMaxSimulatedOps));
  }
  p.schedule.pipeline_size = p.layout.pipeline_size;
  p.schedule.virtual_size = p.layout.virtual_size;
  p.schedule.num_microbatches = num_microbatches;
  p.schedule.microbatch_group_size = group_size;
  p.schedule.kind = schedule_name.empty() ? schedule::default_schedule_kind(p.layout.pipeline_size,
                                                                            p.layout.virtual_size)
                                          : schedule::parse_schedule_kind(schedule_name);
  schedule::validate(p.schedule);
  const int max_d = schedule::schedule_def(p.schedule.kind).max_mtp_num_layers;
  if (max_d >= 0 && model.mtp_num_layers > max_d) {
    throw InputError(fmt::format("{} supports mtp_num_layers <= {}; the model has {}",
                                 schedule::schedule_kind_name(p.schedule.kind), max_d,
                                 model.mtp_num_layers));
  }
  if (model.mtp_num_layers >= model.seq_length) {
    throw InputError(fmt::format("mtp_num_layers = {} must be < seq_length = {}",
                                 model.mtp_num_layers, model.seq_length));
  }
  return p;
}

double ring_collective_ms(const Link& link, int n, double bytes) {
  if (n <= 1) return 0.0;
  return (n - 1) * link.message_ms(bytes / n);
}

std::vector<StageCost> stage_costs(const config::ModelConfig& model,
                                   const layout::PipelineLayout& layout, const CostTable& costs,
                                   uint64_t element_bytes, const Parallelism& par) {
  if (par.cp < 1 || par.ep < 1) {
    throw InputError(fmt::format("cp = {}, ep = {}: each must be >= 1", par.cp, par.ep));
  }
  if (const std::string why = config::context_parallel_misfit(model, par.cp); !why.empty()) {
    throw InputError(fmt::format("cp = {} {}", par.cp, why));
  }
  if (const std::string why = config::expert_parallel_misfit(model, par.ep); !why.empty()) {
    throw InputError(fmt::format("ep = {} {}", par.ep, why));
  }
  const Link& link = par.collective_link ? *par.collective_link : costs.link;
  const double eb = static_cast<double>(element_bytes);
  const double local_tokens =
      static_cast<double>(model.seq_length / par.cp * model.micro_batch_size);
  // One attention layer under CP: K and V each all-gathered whole (s·b·ng·hn) in the forward,
  // their gradients reduce-scattered in the backward (model/layers.cc, context_parallel.h).
  const double kv_ms =
      2.0 * ring_collective_ms(link, par.cp,
                               static_cast<double>(model.seq_length * model.micro_batch_size *
                                                   model.num_query_groups * model.kv_channels()) *
                                   eb);
  // One MoE layer under EP: the expert-count all-gather (E int64 per member), then dispatch and
  // combine each moving topk·h elements per local token (model/expert_parallel.h).
  const double a2a_ms = ring_collective_ms(
      link, par.ep,
      local_tokens * static_cast<double>(model.moe_router_topk * model.hidden_size) * eb);
  const double counts_ms =
      ring_collective_ms(link, par.ep, static_cast<double>(model.num_moe_experts * 8 * par.ep));
  const uint64_t hidden_bytes = static_cast<uint64_t>(model.seq_length / par.cp *
                                                      model.micro_batch_size * model.hidden_size) *
                                element_bytes;
  std::vector<StageCost> out;
  int depths_so_far = 0;
  for (const layout::StagePlan& st : layout.stages) {
    StageCost c;
    auto add = [&c, &par](const NodeCost& n) {
      c.forward_ms += n.forward_ms / par.cp;
      c.backward_ms += n.backward_ms / par.cp;
    };
    auto add_layer = [&](CostNode node, bool moe) {
      add(costs.at(node));
      const double fwd_a2a = moe ? 2.0 * a2a_ms : 0.0, bwd_a2a = fwd_a2a;
      const double fwd = kv_ms + fwd_a2a + (moe ? counts_ms : 0.0), bwd = kv_ms + bwd_a2a;
      c.forward_ms += fwd;
      c.backward_ms += bwd;
      c.forward_collective_ms += fwd;
      c.backward_collective_ms += bwd;
      c.forward_a2a_ms += fwd_a2a;
      c.backward_a2a_ms += bwd_a2a;
    };
    const NodeCost op = costs.at(CostNode::kChunkOp);  // host work per op: not divided by CP
    c.forward_ms += op.forward_ms;
    c.backward_ms += op.backward_ms;
    std::vector<std::string> items;
    if (st.has_embedding) {
      add(costs.at(CostNode::kEmbedding));
      items.emplace_back("E");
    }
    for (int layer : st.decoder_layers) {
      const bool moe = model.is_moe_layer(layer);
      add_layer(moe ? CostNode::kDecoderMoe : CostNode::kDecoderDense, moe);
      items.push_back(fmt::format("t{}", layer));
    }
    if (st.owns_final_layernorm) add(costs.at(CostNode::kFinalLayernorm));
    for (int k : st.mtp_depths) {
      const bool moe = model.mtp_layer_is_moe();
      add_layer(moe ? CostNode::kMtpBlockMoe : CostNode::kMtpBlockDense, moe);
      items.push_back(fmt::format("m{}", k));
    }
    depths_so_far += static_cast<int>(st.mtp_depths.size());
    if (st.has_loss) {
      add(costs.at(CostNode::kOutputHead));
      for (int64_t k = 0; k < model.mtp_num_layers; ++k) add(costs.at(CostNode::kMtpHead));
      items.emplace_back("L");
    }
    c.activation_bytes = stage_activation_bytes(model, st, element_bytes, par.cp);
    c.message_bytes = hidden_bytes * static_cast<uint64_t>(1 + depths_so_far);
    c.has_mtp = !st.mtp_depths.empty();
    c.has_loss = st.has_loss;
    c.has_embedding = st.has_embedding;
    for (const auto& it : items) c.contents += (c.contents.empty() ? "" : " ") + it;
    if (c.contents.empty()) c.contents = "(empty)";
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

/// A combined 1F1B block of `f`'s forward and `b`'s backward: each microbatch's all-to-alls run
/// beside the other's compute, so max(compute, all-to-all); F + B exactly without EP.
double combined_pair_ms(const StageCost& f, const StageCost& b) {
  const double a2a = f.forward_a2a_ms + b.backward_a2a_ms;
  if (a2a == 0.0) return f.forward_ms + b.backward_ms;
  return std::max(f.forward_ms + b.backward_ms - a2a, a2a);
}

}  // namespace

SimResult simulate(const layout::PipelineLayout& layout, const std::vector<StageCost>& stages,
                   const schedule::ScheduleConfig& cfg, const Link& link) {
  const int P = layout.pipeline_size, V = layout.virtual_size;
  if (cfg.pipeline_size != P || cfg.virtual_size != V) {
    throw InputError(
        fmt::format("simulate: the schedule has P = {}, V = {} but the layout has "
                    "P = {}, V = {}",
                    cfg.pipeline_size, cfg.virtual_size, P, V));
  }
  MTP_INTERNAL_ASSERT(static_cast<int>(stages.size()) == layout.num_stages(),
                      "one StageCost per stage");
  std::vector<std::vector<schedule::Op>> ops(P);
  try {
    for (int p = 0; p < P; ++p) ops[p] = schedule::rank_ops(cfg, p);
  } catch (const InputError& e) {
    throw InputError(fmt::format("simulate: {}", e.what()));
  }
  const bool combined = schedule::schedule_def(cfg.kind).combined_steps;
  const int S = layout.num_stages(), M = cfg.num_microbatches;
  constexpr double kNotYet = std::numeric_limits<double>::quiet_NaN();
  // End time of F / B of (stage, microbatch); NaN until computed.
  std::vector<std::vector<double>> fwd_end(S, std::vector<double>(M, kNotYet));
  std::vector<std::vector<double>> bwd_end = fwd_end;
  auto stage_of = [P](int p, const schedule::Op& op) { return op.chunk * P + p; };
  // When op's inputs are there (NaN: not yet known).
  auto ready_at = [&](int p, const schedule::Op& op) -> double {
    const int i = stage_of(p, op);
    const int mb = op.microbatch;
    if (op.type == schedule::OpType::kForward) {
      if (i == 0) return 0.0;
      const double e = fwd_end[i - 1][mb];
      return P > 1 ? e + link.message_ms(static_cast<double>(stages[i - 1].message_bytes)) : e;
    }
    const double own = fwd_end[i][mb];
    if (i == S - 1) return own;
    double e = bwd_end[i + 1][mb];
    if (P > 1) e += link.message_ms(static_cast<double>(stages[i].message_bytes));
    return std::max(own, e);  // NaN propagates through max only via the check below
  };
  auto known = [](double t) { return t == t; };
  std::vector<size_t> next(P, 0);
  std::vector<double> free_at(P, 0.0);
  std::vector<std::vector<SimOp>> done(P);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int p = 0; p < P; ++p) {
      while (next[p] < ops[p].size()) {
        const schedule::Op& op = ops[p][next[p]];
        const bool pair = schedule::combined_pair_at(combined, ops[p], next[p]);
        const int i = stage_of(p, op);
        if (op.type == schedule::OpType::kBackward && !known(fwd_end[i][op.microbatch])) break;
        if (op.type == schedule::OpType::kBackward && i < S - 1 &&
            !known(bwd_end[i + 1][op.microbatch])) {
          break;
        }
        const double r = ready_at(p, op);
        if (!known(r)) break;
        double start = std::max(free_at[p], r);
        double duration =
            op.type == schedule::OpType::kForward ? stages[i].forward_ms : stages[i].backward_ms;
        std::optional<schedule::Op> second;
        if (pair) {
          const schedule::Op& b = ops[p][next[p] + 1];
          const int j = stage_of(p, b);
          const bool b_ready = known(fwd_end[j][b.microbatch]) &&
                               (j == S - 1 || known(bwd_end[j + 1][b.microbatch]));
          if (!b_ready) break;
          start = std::max(start, ready_at(p, b));
          duration = combined_pair_ms(stages[i], stages[j]);
          second = b;
        }
        const double end = start + duration;
        auto finish = [&](const schedule::Op& o) {
          const int s = stage_of(p, o);
          (o.type == schedule::OpType::kForward ? fwd_end : bwd_end)[s][o.microbatch] = end;
          done[p].push_back({p, s, o.microbatch, o.type, second.has_value(), start, end});
        };
        finish(op);
        if (second) finish(*second);
        free_at[p] = end;
        next[p] += second ? 2 : 1;
        progress = true;
      }
    }
  }
  std::string blocked;
  for (int p = 0; p < P; ++p) {
    if (next[p] < ops[p].size()) {
      blocked += fmt::format("{}pipeline rank {} waits at op {} ({})", blocked.empty() ? "" : "; ",
                             p, next[p], schedule::format_ops({ops[p][next[p]]}));
    }
  }
  if (!blocked.empty())
    throw InputError(fmt::format("simulate: the op orders deadlock: {}", blocked));

  SimResult res;
  res.ranks.resize(P);
  for (int p = 0; p < P; ++p) {
    for (const SimOp& o : done[p]) res.step_ms = std::max(res.step_ms, o.end_ms);
  }
  double work_sum = 0.0, max_stage = -1.0;
  for (int i = 0; i < S; ++i) {
    const double w = stages[i].forward_ms + stages[i].backward_ms;
    if (w > max_stage) {
      max_stage = w;
      res.most_loaded_stage = i;
    }
  }
  for (int p = 0; p < P; ++p) {
    RankTime& rt = res.ranks[p];
    for (size_t k = 0; k < done[p].size(); ++k) {
      const SimOp& o = done[p][k];
      const StageCost& sc = stages[o.stage];
      if (o.combined) {  // its partner (pushed right after it) shares the block
        rt.busy_ms += combined_pair_ms(sc, stages[done[p][++k].stage]);
      } else {
        rt.busy_ms += o.type == schedule::OpType::kForward ? sc.forward_ms : sc.backward_ms;
      }
    }
    rt.idle_ms = res.step_ms - rt.busy_ms;
    for (int v = 0; v < V; ++v) {
      const StageCost& sc = stages[v * P + p];
      rt.work_ms += M * (sc.forward_ms + sc.backward_ms);
    }
    work_sum += rt.work_ms;
    uint64_t now = 0;
    int in_flight = 0;
    for (const schedule::Op& op : ops[p]) {
      const uint64_t b = stages[stage_of(p, op)].activation_bytes;
      if (op.type == schedule::OpType::kForward) {
        now += b;
        ++in_flight;
      } else {
        now -= b;
        --in_flight;
      }
      rt.peak_activation_bytes = std::max(rt.peak_activation_bytes, now);
      rt.peak_in_flight = std::max(rt.peak_in_flight, in_flight);
    }
    if (rt.work_ms > res.ranks[res.most_loaded_rank].work_ms) res.most_loaded_rank = p;
    res.ops.insert(res.ops.end(), done[p].begin(), done[p].end());
  }
  const double mean = work_sum / P;
  res.rank_imbalance = mean > 0.0 ? res.ranks[res.most_loaded_rank].work_ms / mean : 1.0;
  double idle = 0.0;
  for (const RankTime& rt : res.ranks) idle += rt.idle_ms;
  res.bubble_fraction = res.step_ms > 0.0 ? idle / (P * res.step_ms) : 0.0;
  return res;
}

}  // namespace mtp::sim
