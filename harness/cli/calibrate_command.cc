// mtp-harness calibrate: every node kind's forward and backward time on this device, for the
// pipeline cost simulator (harness/sim/costs.h; commands.h).
//
// Method. A two-layer slice of the preset model (decoder layer 0 dense, layer 1 MoE when the
// model has experts) is built at P = 1 twice: with one MTP depth ("Et*2mL") and without MTP
// ("Et*2L"). Each chunk program runs in split mode (combined 1F1B's node boundaries,
// model/program.h), node by node, with a device synchronisation around every node's forward and
// backward; the harness's kernels, bf16 and flash attention on CUDA (fp32, unfused on the CPU),
// deterministic algorithms on. A synchronisation per node exposes the host's launch time that a
// real step hides behind the device's work (the first H200 run timed the small model's nodes
// 2.2x slower than its measured step), so every repetition also runs the whole program as the
// plain schedules do (monolithic: one autograd graph, no node cuts), with one synchronisation
// after the forward and one after the backward, and each node's median
// is scaled by median(whole forward) / Σ median(node forwards), likewise for the backward: the
// per-node split keeps its proportions. Even so one microbatch timed alone (0.032 s for the
// small model) was 1.42x the per-microbatch time of BM_PipelineStep's eight back to back (the
// device idles while the host starts each pass), so last every node is scaled once more, by the
// per-microbatch time of a burst of kBurst microbatches run back to back (no synchronisation
// between them, as the executor runs them) over the single microbatch's forward + backward. Nodes
// map to cost kinds by their kind and layer: pre_process → embedding; layer 0's nodes →
// decoder_dense; layer 1's → decoder_moe; the MTP depth's layer and its mtp_post → mtp_block_<kind
// of the last decoder layer>; final_layernorm; post_process without MTP → output_head, and with one
// depth minus that → mtp_head. The other MTP block kind is derived (block − layer of its kind +
// layer of the other kind). Medians over --repeats after
// --warmup. The MoE layer holds --experts-per-rank routed experts with top-k = min(k,
// experts): with balanced routing a rank of an expert-parallel group computes its own tokens ×
// top-k expert MLPs whatever EP is, so the FLOPs are the model's; the all-to-all is not timed.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <set>

#include "harness/cli/commands.h"
#include "harness/common/output_file.h"
#include "harness/config/param_specs.h"
#include "harness/engine/determinism.h"
#include "harness/engine/plan.h"
#include "harness/gpu/gpu.h"
#include "harness/sim/costs.h"
#include "harness/sim/presets.h"
#include "kernels/device_sync.h"

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

/// Initial weights made fast: a block of 2^20 normal values with each parameter's std repeated
/// over the tensor (norms 1). The values change no node's time (with top-k = experts every token
/// reaches every local expert), and a DeepSeek-V3 slice's 4.7e9 values drawn one by one take
/// minutes.
engine::InitialWeights quick_weights(const config::ModelConfig& cfg) {
  engine::InitialWeights w;
  w.specs = config::parameter_specs(cfg);
  at::Generator gen = at::detail::createCPUGenerator(1234);
  const at::Tensor block = at::empty({int64_t{1} << 20}, at::kDouble).normal_(0.0, 1.0, gen);
  for (const auto& spec : w.specs) {
    at::Tensor v = at::empty(spec.shape, at::kDouble);
    if (spec.init_std == 0.0) {
      v.fill_(1.0);
    } else {
      at::Tensor flat = v.view({-1});
      const int64_t n = flat.numel(), k = block.numel();
      for (int64_t at0 = 0; at0 < n; at0 += k) {
        const int64_t len = std::min(k, n - at0);
        flat.narrow(0, at0, len).copy_(block.narrow(0, 0, len)).mul_(spec.init_std);
      }
    }
    w.values.push_back(v);
  }
  return w;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Per node of the program (forward ms, backward ms), medians; keyed by cost kind and summed.
/// Per cost kind, the (scaled) forward and backward milliseconds of one microbatch through the
/// P = 1 chunk of `cfg`; `scales` gets the forward and backward scale factors.
std::map<CostNode, sim::NodeCost> time_nodes(const config::ModelConfig& cfg,
                                             const CalibrateOptions& opt, bool cuda,
                                             std::pair<double, double>* scales) {
  std::string text = "Et*2";
  for (int64_t k = 0; k < cfg.mtp_num_layers; ++k) text += "m";
  text += "L";
  config::TrainingConfig training;
  training.device = cuda ? config::Device::kCuda : config::Device::kCpu;
  training.dtype = cuda ? config::DType::kBFloat16 : config::DType::kFloat32;
  config::VariantSpec variant;
  variant.name = "calibrate";
  variant.implementation = config::Implementation::kReference;
  variant.layout = text;
  config::ModelConfig model = cfg;
  model.kernels = config::Kernels::kHarness;
  model.attention_backend =
      cuda ? config::AttentionBackend::kFlash : config::AttentionBackend::kUnfused;
  auto impl = make_implementation(variant.implementation);
  const engine::RunPlan plan = engine::plan_variant(model, training, variant, *impl);
  const at::Device device = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  const at::ScalarType dtype = cuda ? at::kBFloat16 : at::kFloat;
  auto chunks =
      impl->build_chunks(plan.layout, plan.model, quick_weights(plan.model), dtype, device);
  const int64_t b = model.micro_batch_size, s = model.seq_length;
  engine::MicrobatchTensors mb;
  mb.tokens = at::randint(0, model.vocab_size, {b, s}, at::kLong).to(device);
  mb.labels = at::randint(0, model.vocab_size, {b, s}, at::kLong).to(device);
  mb.loss_mask = at::ones({b, s}, at::kFloat).to(device);
  mb.num_microbatches = 1;
  const at::Tensor flag = at::zeros({1}, at::TensorOptions().device(device));
  auto now = [&flag] {
    kernels::device_sync(flag);
    return std::chrono::steady_clock::now();
  };
  auto ms = [](auto a, auto z) { return std::chrono::duration<double, std::milli>(z - a).count(); };
  std::vector<std::vector<double>> fwd, bwd;
  std::vector<double> whole_fwd, whole_bwd, burst;
  std::vector<std::pair<schedule::NodeKind, int>> nodes;
  auto reset_grads = [&chunks] {
    for (const auto& c : chunks) {
      for (const auto& entry : c->params().entries()) entry.second.mutable_grad().reset();
    }
  };
  for (int rep = 0; rep < opt.warmup + opt.repeats; ++rep) {
    auto prog = chunks[0]->program(at::Tensor(), mb, /*split=*/true);
    const size_t n = prog->size();
    if (nodes.empty()) {
      for (size_t i = 0; i < n; ++i) nodes.emplace_back(prog->node(i).kind, prog->node(i).layer);
      fwd.assign(n, {});
      bwd.assign(n, {});
    }
    std::vector<double> f(n), g(n);
    for (size_t i = 0; i < n; ++i) {
      const auto t0 = now();
      prog->forward_node(i);
      f[i] = ms(t0, now());
    }
    for (size_t i = n; i-- > 0;) {
      const auto t0 = now();
      prog->backward_node(i, at::Tensor());
      g[i] = ms(t0, now());
    }
    reset_grads();
    auto whole = chunks[0]->program(at::Tensor(), mb, /*split=*/false);  // as plain schedules
    const auto w0 = now();
    whole->forward_all();
    const auto w1 = now();
    whole->backward_all(at::Tensor());
    const auto w2 = now();
    reset_grads();
    if (rep >= opt.warmup) {
      for (size_t i = 0; i < n; ++i) {
        fwd[i].push_back(f[i]);
        bwd[i].push_back(g[i]);
      }
      whole_fwd.push_back(ms(w0, w1));
      whole_bwd.push_back(ms(w1, w2));
    }
    const auto b0 = now();
    for (int k = 0; k < kBurst; ++k) {
      auto p = chunks[0]->program(at::Tensor(), mb, /*split=*/false);
      p->forward_all();
      p->backward_all(at::Tensor());
    }
    const auto b1 = now();
    reset_grads();
    if (rep >= opt.warmup) burst.push_back(ms(b0, b1) / kBurst);
  }
  double sum_f = 0.0, sum_b = 0.0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    sum_f += median(fwd[i]);
    sum_b += median(bwd[i]);
  }
  const double single = median(whole_fwd) + median(whole_bwd);
  const double overlap = single > 0.0 ? median(burst) / single : 1.0;
  const double scale_f = sum_f > 0.0 ? overlap * median(whole_fwd) / sum_f : 1.0;
  const double scale_b = sum_b > 0.0 ? overlap * median(whole_bwd) / sum_b : 1.0;
  if (scales != nullptr) *scales = {scale_f, scale_b};
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

}  // namespace

int run_calibrate(const CalibrateOptions& opt) {
  FileRoles files;
  files.output("--out", opt.out);
  const bool cuda = opt.device == "cuda";
  const config::ModelConfig m = sim::preset_model(opt.preset);
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
  const config::ModelConfig with_mtp = slice(m, opt.experts_per_rank, 1);
  const config::ModelConfig without = slice(m, opt.experts_per_rank, 0);
  std::pair<double, double> sa, sz;
  const auto a = time_nodes(with_mtp, opt, cuda, &sa);
  const auto z = time_nodes(without, opt, cuda, &sz);
  for (CostNode c : {CostNode::kEmbedding, CostNode::kDecoderDense, CostNode::kDecoderMoe,
                     CostNode::kFinalLayernorm}) {
    if (z.count(c)) t.nodes[c] = z.at(c);
  }
  const sim::NodeCost head = z.at(CostNode::kOutputHead);
  const sim::NodeCost both = a.at(CostNode::kOutputHead);
  t.nodes[CostNode::kOutputHead] = head;
  // The MTP head does the LM head's work (the same GEMM to the vocabulary and cross entropy): a
  // difference under a quarter of it is noise of two separate timings (a loaded host), and the
  // LM head's time is the better estimate.
  auto mtp_part = [&t](double with, double without, const char* what) {
    const double d = with - without;
    if (d >= 0.25 * without) return d;
    t.notes.push_back(
        fmt::format("mtp_head {} measured as {:.4f} ms, under a quarter of the LM "
                    "head's {:.4f} ms (timing noise): set to the LM head's",
                    what, d, without));
    return without;
  };
  t.nodes[CostNode::kMtpHead] = {mtp_part(both.forward_ms, head.forward_ms, "forward"),
                                 mtp_part(both.backward_ms, head.backward_ms, "backward")};
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
  t.measured_at = {{"preset", opt.preset},
                   {"hidden_size", m.hidden_size},
                   {"ffn_hidden_size", m.ffn_hidden_size},
                   {"num_attention_heads", m.num_attention_heads},
                   {"vocab_size", m.vocab_size},
                   {"seq_length", m.seq_length},
                   {"micro_batch_size", m.micro_batch_size},
                   {"routed_experts_timed", with_mtp.num_moe_experts},
                   {"router_topk_timed", with_mtp.moe_router_topk},
                   {"dtype", cuda ? "bfloat16" : "float32"},
                   {"attention", cuda ? "flash" : "unfused"},
                   {"kernels", "harness"},
                   {"repeats", opt.repeats},
                   {"warmup", opt.warmup}};
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
  t.notes.push_back(fmt::format(
      "node times scaled to the whole chunk's time in a burst of {} microbatches: forward "
      "x{:.3f} / x{:.3f}, backward x{:.3f} / x{:.3f} (with / without MTP)",
      kBurst, sa.first, sz.first, sa.second, sz.second));
  write_file_atomically(opt.out, sim::to_json(t).dump(2) + "\n");
  std::cout << fmt::format("# {:<16} {:>12} {:>12}\n", "node", "forward(ms)", "backward(ms)");
  for (const auto& [n, c] : t.nodes) {
    std::cout << fmt::format("  {:<16} {:>12.4f} {:>12.4f}\n", sim::cost_node_name(n), c.forward_ms,
                             c.backward_ms);
  }
  std::cout << "# written: " << opt.out << "\n";
  return 0;
}

}  // namespace mtp::cli
