#include "harness/cli/calibrate_validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "harness/cli/calibrate_support.h"
#include "harness/common/error.h"
#include "harness/common/utf8.h"
#include "harness/config/enums.h"
#include "harness/engine/chunk_graphs.h"
#include "harness/engine/executor.h"
#include "harness/engine/stage_main_grads.h"
#include "harness/gpu/gpu.h"
#include "harness/sim/simulate.h"
#include "harness/transport/transport.h"

namespace mtp::cli {
namespace {

/// One timed compute block of one step.
struct Timed {
  engine::ComputeBlock block;
  int mark_begin = 0, mark_end = 0;  // Stopwatch marks
  std::chrono::steady_clock::time_point host_begin, host_end;
  double ms = 0.0;       // on the device's queue (Stopwatch)
  double host_ms = 0.0;  // the host's time issuing it: near ms, the op is host-bound
};

/// Times the compute blocks of steps, one block at a time on the device.
class OpTimer {
 public:
  OpTimer(int pipeline_size, bool cuda)
      : watch_(cuda), blocks_(static_cast<size_t>(pipeline_size)) {}

  void attach(engine::ExecutionOptions& exec) {
    exec.before_compute = [this](const engine::ComputeBlock& b) {
      serial_.lock();  // released by after_compute (which the executor calls even on a throw)
      Timed t;
      t.block = b;
      t.mark_begin = watch_.mark();
      t.host_begin = std::chrono::steady_clock::now();
      blocks_[static_cast<size_t>(b.pipeline_rank)].push_back(t);
    };
    exec.after_compute = [this](const engine::ComputeBlock& b) {
      // Unlock whatever happens: the other ranks wait on this lock.
      const std::unique_lock<std::mutex> release(serial_, std::adopt_lock);
      Timed& t = blocks_[static_cast<size_t>(b.pipeline_rank)].back();
      t.host_end = std::chrono::steady_clock::now();
      t.mark_end = watch_.mark();
    };
  }

  /// The step's blocks per pipeline rank with their times (waits for the device); starts over.
  std::vector<std::vector<Timed>> take() {
    std::vector<std::vector<Timed>> out = std::move(blocks_);
    for (auto& rank : out) {
      for (Timed& t : rank) {
        t.ms = watch_.elapsed_ms(t.mark_begin, t.mark_end);
        t.host_ms = std::chrono::duration<double, std::milli>(t.host_end - t.host_begin).count();
      }
    }
    watch_.clear();
    blocks_.assign(out.size(), {});
    return out;
  }

 private:
  Stopwatch watch_;
  std::mutex serial_;
  std::vector<std::vector<Timed>> blocks_;  // per pipeline rank, in op order
};

}  // namespace

MeasuredOps measure_ops(TimedModel& tm, int warmup, int repeats, bool cuda, bool graphs) {
  const layout::PipelineLayout& layout = tm.plan.layout;
  const int P = layout.pipeline_size;
  transport::InProcessOptions topt;
  topt.timeout = std::chrono::milliseconds(600000);
  auto transport = transport::make_in_process_transport(P, topt);
  OpTimer timer(P, cuda);
  engine::ExecutionOptions exec;
  timer.attach(exec);
  std::unique_ptr<engine::PipelineGraphs> pipeline_graphs;
  std::unique_ptr<engine::StageMainGrads> main_grads;
  if (graphs) {
    pipeline_graphs = std::make_unique<engine::PipelineGraphs>(tm.device, layout.num_stages());
    main_grads = std::make_unique<engine::StageMainGrads>(tm.chunks);
    exec.pipeline_graphs = pipeline_graphs.get();
    exec.after_backward = [&main_grads](int stage) { main_grads->accumulate(stage); };
  }
  std::vector<std::vector<double>> rank_sums(static_cast<size_t>(P));
  std::map<std::pair<int, bool>, std::vector<double>> stage_ops, stage_host;
  for (int rep = 0; rep < warmup + repeats; ++rep) {
    engine::run_pipeline_step(tm.chunks, layout, tm.plan.schedule, tm.microbatches, *transport,
                              exec);
    const auto blocks = timer.take();
    tm.reset_grads();
    if (main_grads) main_grads->zero();
    if (rep < warmup) continue;
    std::map<std::pair<int, bool>, std::array<double, 3>> step_ops;  // sum, host sum, count
    for (int p = 0; p < P; ++p) {
      double sum = 0.0;
      for (const Timed& t : blocks[static_cast<size_t>(p)]) {
        sum += t.ms;
        if (t.block.paired_backward) continue;
        const int stage = t.block.op.chunk * P + p;
        auto& [s, h, n] = step_ops[{stage, t.block.op.type == schedule::OpType::kForward}];
        s += t.ms;
        h += t.host_ms;
        n += 1.0;
      }
      rank_sums[static_cast<size_t>(p)].push_back(sum);
    }
    for (const auto& [key, shn] : step_ops) {
      stage_ops[key].push_back(shn[0] / shn[2]);
      stage_host[key].push_back(shn[1] / shn[2]);
    }
  }
  MeasuredOps m;
  for (const auto& v : rank_sums) m.rank_sum_ms.push_back(median(v));
  for (const auto& [key, v] : stage_ops) m.stage_op_ms[key] = median(v);
  for (const auto& [key, v] : stage_host) m.stage_host_ms[key] = median(v);
  return m;
}

namespace {

/// The implementation that runs `layout`: MTP in a stage of its own, the candidate; MTP with
/// the loss, the reference.
config::Implementation implementation_of(const layout::PipelineLayout& layout) {
  return layout.mtp_standalone ? config::Implementation::kCandidate
                               : config::Implementation::kReference;
}

/// The --cuda-graphs runs validate pipelined layouts on CUDA (the planner's rules do the rest).
void require_graphable(const std::string& text, const layout::PipelineLayout& layout, bool cuda) {
  if (!cuda || layout.num_stages() < 2) {
    throw InputError(fmt::format(
        "calibrate --cuda-graphs: '{}' {}: the graphs validate pipelined layouts (more than one "
        "stage) on CUDA",
        text, cuda ? "has one stage" : "runs on the CPU"));
  }
}

}  // namespace

void check_validation_plans(const config::ModelConfig& model, const CalibrateOptions& opt,
                            bool cuda) {
  for (const std::string& text : opt.validate) {
    try {
      const sim::SimulationPlan sp = sim::plan_simulation(model, text, opt.validate_pipeline_size,
                                                          opt.validate_microbatches, "", 0, false);
      if (opt.validate_cuda_graphs) require_graphable(text, sp.layout, cuda);
      (void)plan_timed_model(model, text, opt.validate_pipeline_size, opt.validate_microbatches,
                             cuda, implementation_of(sp.layout), opt.validate_cuda_graphs);
    } catch (const InputError& e) {  // name the flag the layout came from
      throw InputError(fmt::format("--validate {}: {}", printable_excerpt(text, 120), e.what()));
    }
  }
}

int validate_costs(const config::ModelConfig& model, const sim::CostTable& costs,
                   const CalibrateOptions& opt, bool cuda) {
  bool all_within = true;
  for (const std::string& text : opt.validate) {
    const sim::SimulationPlan sp = sim::plan_simulation(model, text, opt.validate_pipeline_size,
                                                        opt.validate_microbatches, "", 0, false);
    const auto stages = sim::stage_costs(model, sp.layout, costs, cuda ? 2 : 4);
    const config::Implementation impl = implementation_of(sp.layout);
    const bool graphs = opt.validate_cuda_graphs;
    if (graphs) require_graphable(text, sp.layout, cuda);
    TimedModel tm = build_timed_model(model, text, opt.validate_pipeline_size,
                                      opt.validate_microbatches, cuda, impl, graphs);
    MTP_INTERNAL_ASSERT(sp.schedule.kind == tm.plan.schedule.kind &&
                            sp.schedule.virtual_size == tm.plan.schedule.virtual_size,
                        "the simulated schedule is not the one the run uses");
    const sim::SimResult r = sim::simulate(sp.layout, stages, sp.schedule, costs.link);
    const MeasuredOps m = measure_ops(tm, opt.warmup, opt.repeats, cuda, graphs);
    // The graphs died with measure(): their pools back to the device before the next layout's.
    if (graphs) gpu::release_cached_memory(0);
    const int P = sp.layout.pipeline_size;
    std::cout << fmt::format(
        "# validate '{}' ({}): P = {}, V = {}, {}, M = {} ({} on {}{}), {} timed steps after {} "
        "warm-up, ranks as threads, their computes one at a time\n",
        text, config::enum_name(impl), P, sp.layout.virtual_size,
        schedule::schedule_kind_name(sp.schedule.kind), opt.validate_microbatches,
        cuda ? "bf16" : "fp32", costs.gpu, graphs ? ", CUDA graphs" : "", opt.repeats, opt.warmup);
    std::cout << fmt::format("  {:<5} {:>18} {:>18} {:>10}\n", "rank", "simulated busy(ms)",
                             "measured sum(ms)", "measured/simulated");
    double worst = 0.0;
    int worst_rank = 0;
    for (int p = 0; p < P; ++p) {
      const double sim_ms = r.ranks[static_cast<size_t>(p)].busy_ms;
      const double got = m.rank_sum_ms[static_cast<size_t>(p)];
      const double ratio = sim_ms > 0.0 ? got / sim_ms : INFINITY;
      if (std::abs(ratio - 1.0) >= worst) {
        worst = std::abs(ratio - 1.0);
        worst_rank = p;
      }
      std::cout << fmt::format("  {:<5} {:>18.3f} {:>18.3f} {:>10.3f}\n", p, sim_ms, got, ratio);
    }
    std::cout << fmt::format(
        "  {:<5} {:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}   (one microbatch, ms; host: the "
        "host's time issuing the op)\n",
        "stage", "contents", "sim fwd", "meas fwd", "host fwd", "sim bwd", "meas bwd", "host bwd");
    for (size_t i = 0; i < stages.size(); ++i) {
      auto got = [&](const std::map<std::pair<int, bool>, double>& in, bool fwd) {
        auto it = in.find({static_cast<int>(i), fwd});
        return it == in.end() ? std::string("-") : fmt::format("{:.3f}", it->second);
      };
      std::cout << fmt::format("  {:<5} {:<14} {:>9.3f} {:>9} {:>9} {:>9.3f} {:>9} {:>9}\n", i,
                               stages[i].contents.empty() ? "(empty)" : stages[i].contents,
                               stages[i].forward_ms, got(m.stage_op_ms, true),
                               got(m.stage_host_ms, true), stages[i].backward_ms,
                               got(m.stage_op_ms, false), got(m.stage_host_ms, false));
    }
    const bool within = worst <= opt.tolerance;
    all_within = all_within && within;
    std::cout << fmt::format(
        "# {}: every rank's measured op sum within {:.0f} % of the simulated busy time? {} "
        "(worst: rank {}, off by {:.1f} %)\n",
        within ? "PASS" : "FAIL", 100.0 * opt.tolerance, within ? "yes" : "no", worst_rank,
        100.0 * worst);
  }
  return all_within ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
