#include "harness/report/faster.h"

#include <fmt/format.h>

#include <chrono>

#include "harness/sim/presets.h"
#include "harness/sim/simulate.h"

namespace mtp::report {

ExpectationResult evaluate_faster(const scenario::Expectation& e,
                                  const config::ModelConfig& scenario_model) {
  const auto t0 = std::chrono::steady_clock::now();
  const scenario::SimulatedClaim& c = *e.simulated;
  const config::ModelConfig m = c.preset.empty() ? scenario_model : sim::preset_model(c.preset);
  const sim::CostTable costs = sim::read_costs(c.costs);
  sim::Parallelism par;
  par.cp = c.cp;
  par.ep = c.ep;
  if (!c.collective_link.empty()) par.collective_link = sim::named_link(c.collective_link);
  std::vector<double> step;
  std::vector<std::string> stage;
  for (const std::string& text : c.layouts) {
    const sim::SimulationPlan plan =
        sim::plan_simulation(m, text, c.pipeline_size, c.num_microbatches, c.schedule, 0, c.split);
    const auto stages = sim::stage_costs(m, plan.layout, costs, 2, par);
    const sim::SimResult r = sim::simulate(plan.layout, stages, plan.schedule, costs.link);
    step.push_back(r.step_ms);
    stage.push_back(fmt::format("bubble {:.1f} %, imbalance {:.3f}", 100.0 * r.bubble_fraction,
                                r.rank_imbalance));
  }
  ExpectationResult out;
  out.expectation = &e;
  PairResult p;
  p.baseline = c.layouts[0];
  p.other = c.layouts[1];
  // A baseline that costs nothing makes no ratio: such costs price nothing and prove nothing.
  const double ratio = step[0] > 0.0 ? step[1] / step[0] : 0.0;
  p.holds = step[0] > 0.0 && ratio <= c.at_most;
  if (!(step[0] > 0.0)) {
    p.result.equal = false;
    p.verdict = fmt::format(
        "NO VERDICT: the baseline's simulated step is {} ms (the costs {} price "
        "nothing)",
        step[0], c.costs);
    out.holds = false;
    out.pairs.push_back(std::move(p));
    return out;
  }
  p.result.equal = p.holds;
  p.verdict = fmt::format(
      "{}simulated step {:.1f} ms = {:.3f} x {:.1f} ms (at most {:g}); {} vs {} (P {}, M {}{}, "
      "costs {})",
      p.holds ? "" : "SLOWER THAN CLAIMED: ", step[1], ratio, step[0], c.at_most, stage[1],
      stage[0], c.pipeline_size, c.num_microbatches,
      c.cp > 1 || c.ep > 1
          ? fmt::format(", CP {}, EP {} over {}", c.cp, c.ep,
                        par.collective_link ? par.collective_link->name : costs.link.name)
          : "",
      c.costs);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.holds = p.holds;
  out.pairs.push_back(std::move(p));
  return out;
}

std::string resimulate_command(const scenario::Expectation& e, const std::string& scenario_source) {
  const scenario::SimulatedClaim& c = *e.simulated;
  std::string cmd =
      fmt::format("mtp-harness simulate {} --costs {} --pp {} --microbatches {}",
                  c.preset.empty() ? "--scenario " + scenario_source : "--preset " + c.preset,
                  c.costs, c.pipeline_size, c.num_microbatches);
  if (!c.schedule.empty()) cmd += " --schedule " + c.schedule;
  if (c.split) cmd += " --split";
  if (c.cp > 1) cmd += fmt::format(" --cp {}", c.cp);
  if (c.ep > 1) cmd += fmt::format(" --ep {}", c.ep);
  if (!c.collective_link.empty()) cmd += " --collective-link " + c.collective_link;
  for (const auto& l : c.layouts) cmd += " --layout '" + l + "'";
  return cmd;
}

}  // namespace mtp::report
