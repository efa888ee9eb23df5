// mtp-harness calibrate: every node kind's forward and backward time on this device, for the
// pipeline cost simulator (harness/sim/costs.h; commands.h).
//
// Method. A two-layer slice of the preset model (decoder layer 0 dense, layer 1 MoE when the
// model has experts) is built at P = 1 twice: with one MTP depth ("Et*2mL") and without MTP
// ("Et*2L"); the harness's kernels, bf16 and flash attention on CUDA (fp32, unfused on the CPU),
// deterministic algorithms on. Every repetition runs kBurst microbatches back to back node by
// node (split mode: combined 1F1B's node boundaries, model/program.h), then kBurst back to back
// through the whole program as the plain schedules run it (monolithic: one autograd graph, no
// node cuts), as the executor runs microbatches: no synchronisation, only time stamps on the
// device's queue (Stopwatch, calibrate_support.h: CUDA events) between nodes, read after the
// burst. Each node's median is scaled by median(whole forward) / Σ median(node forwards),
// likewise for the backward: the per-node split keeps its proportions, the totals are the
// monolithic program's. Two earlier methods were off, each shown by a measurement: a
// synchronisation around every node exposed the host's launch time (2.2x the small model's
// step); synchronised single microbatches scaled to a burst's total got the total right but
// split it between forward and backward by the single microbatch's proportions, where the
// forward waits on the host and the backward does not (`calibrate --validate` measured the
// small model's pipelined backward ops at 1.2-1.9x their price). Each op of a chunk also pays a
// fixed cost whatever it holds (chunk_op: the executor's and autograd's host work; the next
// validation measured a one-layer op at 1.6-1.8x a layer's price and an empty stage's at 0.1 ms
// forward, 0.25 ms backward), timed apart (time_chunk_op) and taken off the whole program's time
// before the nodes are scaled to it. Nodes map
// to cost kinds by their kind and layer: pre_process → embedding; layer 0's nodes →
// decoder_dense; layer 1's → decoder_moe; the MTP depth's layer and its mtp_post → mtp_block_<kind
// of the last decoder layer>; final_layernorm; post_process without MTP → output_head, and with one
// depth minus that → mtp_head. The other MTP block kind is derived (block − layer of its kind +
// layer of the other kind). Medians over --repeats after
// --warmup. The MoE layer holds --experts-per-rank routed experts with top-k = min(k,
// experts): with balanced routing a rank of an expert-parallel group computes its own tokens ×
// top-k expert MLPs whatever EP is, so the FLOPs are the model's; the all-to-all is not timed.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <map>
#include <set>

#include "harness/cli/calibrate_stages.h"
#include "harness/cli/calibrate_support.h"
#include "harness/cli/calibrate_validate.h"
#include "harness/cli/commands.h"
#include "harness/common/output_file.h"
#include "harness/engine/determinism.h"
#include "harness/gpu/gpu.h"
#include "harness/sim/costs.h"
#include "harness/sim/presets.h"

namespace mtp::cli {
namespace {

using sim::CostNode;

/// Microbatches run back to back for the burst time (the benchmark's M).
constexpr int kBurst = 8;

/// The two-layer slice of `m` that is timed, with `depths` MTP depths.
config::ModelConfig slice(const config::ModelConfig& m, int experts, int64_t depths) {
  config::ModelConfig s = m;
  s.num_layers = 2;
  s.mtp_num_layers = depths;
  if (m.num_moe_experts > 0) {
    s.num_moe_experts = std::min<int64_t>(m.num_moe_experts, experts);
    s.moe_router_topk = std::min(m.moe_router_topk, s.num_moe_experts);
    s.moe_layer_freq = {0, 1};
    s.moe_router_expert_bias.clear();
  } else {
    s.moe_layer_freq.clear();
  }
  return s;
}

/// The chunk op's fixed cost (sim/costs.h): a dense three-layer slice on "E|t|tt|L" (P = 2,
/// V = 2) whose one-layer stage 1 and two-layer stage 2 run as a middle pipeline stage does (a
/// received input with requires_grad, a gradient from the next stage), kBurst microbatches back to
/// back per repetition; with T1 and T2 their median op times, a layer costs T2 − T1 and an op
/// 2·T1 − T2 (at least 0), forward and backward each.
sim::NodeCost time_chunk_op(const config::ModelConfig& m, const CalibrateOptions& opt, bool cuda) {
  config::ModelConfig cfg = m;
  cfg.num_layers = 3;
  cfg.mtp_num_layers = 0;
  if (cfg.num_moe_experts > 0) {  // dense layers, the MoE fields kept small and valid
    cfg.num_moe_experts = std::min<int64_t>(cfg.num_moe_experts, opt.experts_per_rank);
    cfg.moe_router_topk = std::min(cfg.moe_router_topk, cfg.num_moe_experts);
    cfg.moe_layer_freq = {0, 0, 0};
    cfg.moe_router_expert_bias.clear();
  }
  TimedModel tm = build_timed_model(cfg, "E|t|tt|L", /*pipeline_size=*/2, /*num_microbatches=*/2,
                                    cuda, config::Implementation::kReference);
  const engine::MicrobatchTensors& mb = tm.microbatches[0];
  const at::TensorOptions o =
      at::TensorOptions().device(tm.device).dtype(cuda ? at::kBFloat16 : at::kFloat);
  Stopwatch watch(cuda);
  std::array<std::vector<double>, 2> f, b;  // stage 1, stage 2
  for (int rep = 0; rep < opt.warmup + opt.repeats; ++rep) {
    std::vector<std::array<int, 4>> marks;  // stage, before F, after F = before B, after B
    for (int k = 0; k < kBurst; ++k) {
      for (int s : {1, 2}) {
        const auto& chunk = tm.chunks[static_cast<size_t>(s)];
        const at::Tensor input = at::randn(chunk->input_shape(), o).requires_grad_(true);
        const at::Tensor grad = at::randn(chunk->output_shape(), o);
        auto prog = chunk->program(input, mb, /*split=*/false);
        const int m0 = watch.mark();
        prog->forward_all();
        const int m1 = watch.mark();
        prog->backward_all(grad);
        marks.push_back({s, m0, m1, watch.mark()});
      }
    }
    tm.reset_grads();
    if (rep >= opt.warmup) {
      for (const auto& [s, m0, m1, m2] : marks) {
        f[static_cast<size_t>(s - 1)].push_back(watch.elapsed_ms(m0, m1));
        b[static_cast<size_t>(s - 1)].push_back(watch.elapsed_ms(m1, m2));
      }
    }
    watch.clear();
  }
  return {std::max(0.0, 2.0 * median(f[0]) - median(f[1])),
          std::max(0.0, 2.0 * median(b[0]) - median(b[1]))};
}

/// One microbatch through the whole program (medians, ms): on the device's queue and the host's
/// time issuing it. Host near device: the burst is host-bound, and so are the costs.
struct WholeProgram {
  double forward_ms = 0.0, forward_host_ms = 0.0;
  double backward_ms = 0.0, backward_host_ms = 0.0;
};

/// Per cost kind, the (scaled) forward and backward milliseconds of one microbatch through the
/// P = 1 chunk of `cfg`, the whole program's time less one chunk op `op`; `scales` gets the
/// forward and backward scale factors, `whole` the whole program's times.
std::map<CostNode, sim::NodeCost> time_nodes(const config::ModelConfig& cfg,
                                             const CalibrateOptions& opt, bool cuda,
                                             const sim::NodeCost& op,
                                             std::pair<double, double>* scales,
                                             WholeProgram* whole_program) {
  std::string text = "Et*2";
  for (int64_t k = 0; k < cfg.mtp_num_layers; ++k) text += "m";
  text += "L";
  TimedModel tm = build_timed_model(cfg, text, /*pipeline_size=*/1, /*num_microbatches=*/1, cuda,
                                    config::Implementation::kReference);
  const config::ModelConfig& model = tm.plan.model;
  const auto& chunks = tm.chunks;
  const engine::MicrobatchTensors& mb = tm.microbatches[0];
  Stopwatch watch(cuda);
  // Per node, every timed microbatch's forward and backward; per microbatch the whole chunk's.
  std::vector<std::vector<double>> fwd, bwd;
  std::vector<double> whole_fwd, whole_bwd, whole_fwd_host, whole_bwd_host;
  std::vector<std::pair<schedule::NodeKind, int>> nodes;
  for (int rep = 0; rep < opt.warmup + opt.repeats; ++rep) {
    // kBurst microbatches node by node (split mode), then kBurst through the whole program, back
    // to back: marks only, read at the end.
    std::vector<std::vector<int>> fmarks, bmarks;  // per microbatch: before node 0, after each
    for (int k = 0; k < kBurst; ++k) {
      auto prog = chunks[0]->program(at::Tensor(), mb, /*split=*/true);
      const size_t n = prog->size();
      if (nodes.empty()) {
        for (size_t i = 0; i < n; ++i) nodes.emplace_back(prog->node(i).kind, prog->node(i).layer);
        fwd.assign(n, {});
        bwd.assign(n, {});
      }
      std::vector<int> f{watch.mark()}, g;
      for (size_t i = 0; i < n; ++i) {
        prog->forward_node(i);
        f.push_back(watch.mark());
      }
      g.push_back(f.back());
      for (size_t i = n; i-- > 0;) {
        prog->backward_node(i, at::Tensor());
        g.push_back(watch.mark());  // g[n - i] ends node i
      }
      fmarks.push_back(std::move(f));
      bmarks.push_back(std::move(g));
    }
    tm.reset_grads();
    std::vector<std::array<int, 3>> wmarks;
    for (int k = 0; k < kBurst; ++k) {
      auto whole = chunks[0]->program(at::Tensor(), mb, /*split=*/false);  // as plain schedules
      const int w0 = watch.mark();
      whole->forward_all();
      const int w1 = watch.mark();
      whole->backward_all(at::Tensor());
      wmarks.push_back({w0, w1, watch.mark()});
    }
    tm.reset_grads();
    if (rep >= opt.warmup) {
      const size_t n = nodes.size();
      for (int k = 0; k < kBurst; ++k) {
        const auto& f = fmarks[static_cast<size_t>(k)];
        const auto& g = bmarks[static_cast<size_t>(k)];
        for (size_t i = 0; i < n; ++i) {
          fwd[i].push_back(watch.elapsed_ms(f[i], f[i + 1]));
          bwd[i].push_back(watch.elapsed_ms(g[n - 1 - i], g[n - i]));
        }
        const auto& w = wmarks[static_cast<size_t>(k)];
        whole_fwd.push_back(watch.elapsed_ms(w[0], w[1]));
        whole_bwd.push_back(watch.elapsed_ms(w[1], w[2]));
        whole_fwd_host.push_back(watch.host_elapsed_ms(w[0], w[1]));
        whole_bwd_host.push_back(watch.host_elapsed_ms(w[1], w[2]));
      }
    }
    watch.clear();
  }
  double sum_f = 0.0, sum_b = 0.0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    sum_f += median(fwd[i]);
    sum_b += median(bwd[i]);
  }
  const double scale_f =
      sum_f > 0.0 ? std::max(0.0, median(whole_fwd) - op.forward_ms) / sum_f : 1.0;
  const double scale_b =
      sum_b > 0.0 ? std::max(0.0, median(whole_bwd) - op.backward_ms) / sum_b : 1.0;
  if (scales != nullptr) *scales = {scale_f, scale_b};
  if (whole_program != nullptr) {
    *whole_program = {median(whole_fwd), median(whole_fwd_host), median(whole_bwd),
                      median(whole_bwd_host)};
  }
  std::map<CostNode, sim::NodeCost> out;
  std::map<CostNode, std::set<int>> layers_of;  // a kind's cost is per layer: divide by these
  const int N = static_cast<int>(model.num_layers);
  const CostNode mtp_kind =
      model.mtp_layer_is_moe() ? CostNode::kMtpBlockMoe : CostNode::kMtpBlockDense;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto [kind, layer] = nodes[i];
    CostNode c;
    if (kind == schedule::NodeKind::kPreProcess) {
      c = CostNode::kEmbedding;
    } else if (kind == schedule::NodeKind::kFinalLayernorm) {
      c = CostNode::kFinalLayernorm;
    } else if (kind == schedule::NodeKind::kPostProcess) {
      c = CostNode::kOutputHead;  // the caller splits off the MTP heads
    } else if (kind == schedule::NodeKind::kMtpPost || layer >= N) {
      c = mtp_kind;
    } else {
      c = model.is_moe_layer(layer) ? CostNode::kDecoderMoe : CostNode::kDecoderDense;
    }
    out[c].forward_ms += scale_f * median(fwd[i]);
    out[c].backward_ms += scale_b * median(bwd[i]);
    if (c == CostNode::kDecoderDense || c == CostNode::kDecoderMoe) layers_of[c].insert(layer);
  }
  // A dense model's slice has two dense layers (the first H200 calibration summed them into one
  // decoder_dense, doubling it): the cost of a kind is per layer.
  for (const auto& [c, layers] : layers_of) {
    out[c].forward_ms /= static_cast<double>(layers.size());
    out[c].backward_ms /= static_cast<double>(layers.size());
  }
  return out;
}

/// The eager calibration (the file comment's method) of `m` into `t`'s nodes, measured_at and
/// notes; returns the notes calibrate prints (the whole program's device and host times).
std::vector<std::string> calibrate_eager(const config::ModelConfig& m, const CalibrateOptions& opt,
                                         bool cuda, sim::CostTable& t) {
  const config::ModelConfig with_mtp = slice(m, opt.experts_per_rank, 1);
  const config::ModelConfig without = slice(m, opt.experts_per_rank, 0);
  std::pair<double, double> sa, sz;
  WholeProgram wa, wz;
  const sim::NodeCost op = time_chunk_op(m, opt, cuda);
  t.nodes[CostNode::kChunkOp] = op;
  const auto a = time_nodes(with_mtp, opt, cuda, op, &sa, &wa);
  const auto z = time_nodes(without, opt, cuda, op, &sz, &wz);
  for (CostNode c : {CostNode::kEmbedding, CostNode::kDecoderDense, CostNode::kDecoderMoe,
                     CostNode::kFinalLayernorm}) {
    if (z.count(c)) t.nodes[c] = z.at(c);
  }
  const sim::NodeCost head = z.at(CostNode::kOutputHead);
  const sim::NodeCost both = a.at(CostNode::kOutputHead);
  t.nodes[CostNode::kOutputHead] = head;
  t.nodes[CostNode::kMtpHead] = sim::mtp_head_cost(
      {both.forward_ms - head.forward_ms, both.backward_ms - head.backward_ms}, head, &t.notes);
  const bool moe = m.num_moe_experts > 0;
  if (!moe) t.nodes[CostNode::kDecoderMoe] = t.nodes[CostNode::kDecoderDense];
  const CostNode measured =
      with_mtp.mtp_layer_is_moe() ? CostNode::kMtpBlockMoe : CostNode::kMtpBlockDense;
  const CostNode derived =
      measured == CostNode::kMtpBlockMoe ? CostNode::kMtpBlockDense : CostNode::kMtpBlockMoe;
  t.nodes[measured] = a.at(measured);
  const sim::NodeCost& dense = t.nodes[CostNode::kDecoderDense];
  const sim::NodeCost& moe_layer = t.nodes[CostNode::kDecoderMoe];
  const double sign = measured == CostNode::kMtpBlockMoe ? 1.0 : -1.0;
  t.nodes[derived] = {
      std::max(0.0, a.at(measured).forward_ms - sign * (moe_layer.forward_ms - dense.forward_ms)),
      std::max(0.0,
               a.at(measured).backward_ms - sign * (moe_layer.backward_ms - dense.backward_ms))};
  t.measured_at = sim::measured_dimensions(m);
  t.measured_at["preset"] = opt.preset;
  t.measured_at["routed_experts_timed"] = with_mtp.num_moe_experts;
  t.measured_at["router_topk_timed"] = with_mtp.moe_router_topk;
  t.measured_at["dtype"] = cuda ? "bfloat16" : "float32";
  t.measured_at["attention"] = cuda ? "flash" : "unfused";
  t.measured_at["kernels"] = "harness";
  t.measured_at["repeats"] = opt.repeats;
  t.measured_at["warmup"] = opt.warmup;
  if (moe) {
    t.notes.push_back(fmt::format(
        "decoder_moe and the MoE MTP block timed with {} routed experts and top-{} (the model has "
        "{} and top-{}): with balanced routing an expert-parallel rank computes its tokens x "
        "top-k expert MLPs whatever EP is; the all-to-all is not timed",
        with_mtp.num_moe_experts, with_mtp.moe_router_topk, m.num_moe_experts, m.moe_router_topk));
  }
  t.notes.push_back(fmt::format("{} derived: the measured {} minus its layer kind plus the other",
                                sim::cost_node_name(derived), sim::cost_node_name(measured)));
  t.notes.push_back("mtp_head = post_process with one MTP depth minus post_process without MTP");
  t.notes.push_back(
      "chunk_op = 2 T1 - T2 of a one-layer and a two-layer middle stage (every stage's op pays "
      "it once per microbatch, an empty stage only it)");
  t.notes.push_back(
      fmt::format("node times (device time stamps, bursts of {} microbatches) scaled to the whole "
                  "program's less one chunk_op: forward x{:.3f} / x{:.3f}, backward x{:.3f} / "
                  "x{:.3f} (with / without MTP)",
                  kBurst, sa.first, sz.first, sa.second, sz.second));
  // What the host's issue time says about the costs (a cost the host bounds is the host's).
  auto whole_line = [](const char* what, const WholeProgram& w) {
    return fmt::format(
        "whole program {} per microbatch: forward {:.4f} ms on the device's queue, {:.4f} ms of "
        "the host's issue time; backward {:.4f} / {:.4f} ms",
        what, w.forward_ms, w.forward_host_ms, w.backward_ms, w.backward_host_ms);
  };
  std::vector<std::string> shown = {whole_line("with MTP", wa), whole_line("without MTP", wz)};
  t.notes.insert(t.notes.end(), shown.begin(), shown.end());
  return shown;
}

}  // namespace

int run_calibrate(const CalibrateOptions& opt) {
  const bool cuda = opt.device == "cuda";
  if (opt.validate_cuda_graphs && !cuda) {
    throw InputError("calibrate --cuda-graphs: CUDA graphs need --device cuda");
  }
  if (opt.validate_cuda_graphs && opt.warmup < 2) {
    throw InputError(fmt::format(
        "calibrate --cuda-graphs: --warmup {} must be at least 2 (the first steps run eagerly "
        "and capture the graphs; the timed steps must be replays)",
        opt.warmup));
  }
  const config::ModelConfig m = sim::preset_model(opt.preset);
  check_validation_plans(m, opt, cuda);  // refused before anything is timed or written
  const bool from_stages = opt.from_stages || opt.validate_cuda_graphs;
  if (from_stages && opt.costs.empty()) check_stage_calibration(m, opt);
  if (!opt.costs.empty()) {  // validate a costs file, calibrate nothing
    const sim::CostTable costs = sim::read_costs(opt.costs);
    sim::check_costs_fit(costs, m);
    engine::apply_determinism();
    return validate_costs(m, costs, opt, cuda);
  }
  FileRoles files;
  files.output("--out", opt.out);
  engine::apply_determinism();
  sim::CostTable t;
  t.link = sim::named_link(opt.link);
  if (cuda) {
    const auto fp = gpu::gpu_fingerprint(0);
    t.gpu = fp.count("gpu_name") ? fp.at("gpu_name") : "CUDA device 0";
    for (const auto& [k, v] : fp) t.fingerprint[k] = v;
  } else {
    t.gpu = "CPU";
  }
  for (const auto& [k, v] : engine::determinism_fingerprint()) t.fingerprint[k] = v;
  std::cerr << fmt::format("# calibrate: preset {} on {} ({} warm-up + {} timed repetitions)\n",
                           opt.preset, t.gpu, opt.warmup, opt.repeats);
  const std::vector<std::string> shown =
      from_stages ? calibrate_from_stages(m, opt, t) : calibrate_eager(m, opt, cuda, t);
  write_file_atomically(opt.out, sim::to_json(t).dump(2) + "\n");
  std::cout << fmt::format("# {:<16} {:>12} {:>12}\n", "node", "forward(ms)", "backward(ms)");
  for (const auto& [n, c] : t.nodes) {
    std::cout << fmt::format("  {:<16} {:>12.4f} {:>12.4f}\n", sim::cost_node_name(n), c.forward_ms,
                             c.backward_ms);
  }
  for (const std::string& n : shown) std::cout << "# " << n << "\n";
  std::cout << "# written: " << opt.out << "\n";
  return opt.validate.empty() ? kExitOk : validate_costs(m, t, opt, cuda);
}

}  // namespace mtp::cli
