// mtp-harness simulate: the pipeline cost simulator (harness/sim) over one or more layouts of a
// model, with the node costs `calibrate` measured (commands.h).

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <iostream>

#include "harness/cli/commands.h"
#include "harness/common/output_file.h"
#include "harness/common/utf8.h"
#include "harness/report/markup.h"
#include "harness/scenario/scenario.h"
#include "harness/sim/costs.h"
#include "harness/sim/presets.h"
#include "harness/sim/simulate.h"
#include "harness/sim/timeline_svg.h"

namespace mtp::cli {
namespace {

constexpr uint64_t kBf16Bytes = 2;  // the simulated run's activations and messages are bf16

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

/// The model: a preset or a scenario's [model], D overridden by --mtp.
std::pair<config::ModelConfig, std::string> simulated_model(const SimulateOptions& opt) {
  if (opt.preset.empty() == opt.scenario.empty()) {
    throw InputError("simulate: give the model with exactly one of --preset and --scenario");
  }
  config::ModelConfig m;
  std::string name;
  if (!opt.preset.empty()) {
    try {
      m = sim::preset_model(opt.preset);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--preset: {}", e.what()));
    }
    name = "preset " + opt.preset;
  } else {
    m = scenario::load_scenario(opt.scenario).model;
    name = opt.scenario;
  }
  // No m.validate(): its size caps are the trainer's (a DeepSeek-V3 is far over them); the
  // presets are consistent and a scenario's [model] was checked when it was parsed.
  if (opt.mtp_num_layers >= 0) m.mtp_num_layers = opt.mtp_num_layers;
  return {m, name};
}

struct LayoutResult {
  layout::PipelineLayout layout;
  schedule::ScheduleConfig schedule;
  std::vector<sim::StageCost> stages;
  sim::SimResult result;
};

}  // namespace

int run_simulate(const SimulateOptions& opt) {
  FileRoles files;
  files.input("--costs", opt.costs);
  if (!opt.scenario.empty()) files.input("--scenario", opt.scenario);
  if (!opt.html_path.empty()) files.output("--html", opt.html_path);
  if (!opt.json_path.empty()) files.output("--json", opt.json_path);
  const auto [model, model_name] = simulated_model(opt);
  sim::CostTable costs = sim::read_costs(opt.costs);
  sim::check_costs_fit(costs, model);
  if (!opt.link.empty()) costs.link = sim::named_link(opt.link);
  if (!opt.schedule.empty()) {
    try {
      schedule::parse_schedule_kind(opt.schedule);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--schedule: {}", e.what()));
    }
  }
  sim::Parallelism par;
  par.cp = opt.context_parallel_size;
  par.ep = opt.expert_parallel_size;
  if (!opt.collective_link.empty()) par.collective_link = sim::named_link(opt.collective_link);
  if (par.collective_link && par.cp == 1 && par.ep == 1) {
    throw InputError(
        "--collective-link prices the CP and EP collectives: give --cp or --ep > 1 with it");
  }
  const sim::Link& collective_link = par.collective_link ? *par.collective_link : costs.link;
  if (const std::string why = config::context_parallel_misfit(model, par.cp); !why.empty()) {
    throw InputError(fmt::format("--cp {}: {} ({})", par.cp, why, model_name));
  }
  if (const std::string why = config::expert_parallel_misfit(model, par.ep); !why.empty()) {
    throw InputError(fmt::format("--ep {}: {} ({})", par.ep, why, model_name));
  }
  std::vector<LayoutResult> runs;
  for (const std::string& text : opt.layouts) {
    LayoutResult lr;
    sim::SimulationPlan plan;
    try {
      plan = sim::plan_simulation(model, text, opt.pipeline_size, opt.num_microbatches,
                                  opt.schedule, opt.group_size, opt.split);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--layout {}: {}", printable_excerpt(text, 120), e.what()));
    }
    lr.layout = plan.layout;
    lr.schedule = plan.schedule;
    // One SVG block per op: refuse a page nobody can open before computing it.
    constexpr int64_t kMaxHtmlOps = 400000;
    const int64_t ops = int64_t{2} * lr.layout.num_stages() * opt.num_microbatches;
    if (!opt.html_path.empty() && ops > kMaxHtmlOps) {
      throw InputError(
          fmt::format("--html: layout {} with M = {} has {} ops; the timeline draws "
                      "at most {} (omit --html, or simulate fewer microbatches)",
                      printable_excerpt(text, 120), opt.num_microbatches, ops, kMaxHtmlOps));
    }
    lr.stages = sim::stage_costs(model, lr.layout, costs, kBf16Bytes, par);
    lr.result = sim::simulate(lr.layout, lr.stages, lr.schedule, costs.link);
    runs.push_back(std::move(lr));
  }

  std::cout << fmt::format(
      "# simulate: {} ({} layers, H {}, D {}, s {}, b {}), costs {} ({}; link {} {:g} GB/s, "
      "{:g} us), P {}, M {}{}\n",
      model_name, model.num_layers, model.hidden_size, model.mtp_num_layers, model.seq_length,
      model.micro_batch_size, opt.costs, costs.gpu.empty() ? "unnamed device" : costs.gpu,
      costs.link.name, costs.link.bandwidth_gb_per_s, costs.link.latency_us, opt.pipeline_size,
      opt.num_microbatches,
      par.cp > 1 || par.ep > 1
          ? fmt::format(", CP {}, EP {} (collectives over {} {:g} GB/s, {:g} us)", par.cp, par.ep,
                        collective_link.name, collective_link.bandwidth_gb_per_s,
                        collective_link.latency_us)
          : "");
  size_t w = 6;
  for (const auto& r : runs) w = std::max(w, r.layout.text.size());
  std::cout << fmt::format("# {:<{}} {:>2} {:<13} {:>11} {:>7} {:>9} {:>13} {:>9}  {}\n", "layout",
                           w, "V", "schedule", "step(ms)", "bubble", "imbalance", "peak act(GiB)",
                           "vs first", "most loaded stage");
  nlohmann::json j;
  j["schema_version"] = 1;
  j["model"] = model_name;
  j["costs"] = opt.costs;
  j["link"] = {{"name", costs.link.name},
               {"bandwidth_gb_per_s", costs.link.bandwidth_gb_per_s},
               {"latency_us", costs.link.latency_us}};
  j["layouts"] = nlohmann::json::array();
  const double first = runs.front().result.step_ms;
  // A ratio to a step that costs nothing means nothing.
  auto ratio = [first](double ms) { return first > 0.0 ? ms / first : 0.0; };
  j["pipeline_size"] = opt.pipeline_size;
  j["context_parallel_size"] = par.cp;
  j["expert_parallel_size"] = par.ep;
  j["collective_link"] = {{"name", collective_link.name},
                          {"bandwidth_gb_per_s", collective_link.bandwidth_gb_per_s},
                          {"latency_us", collective_link.latency_us}};
  j["num_microbatches"] = opt.num_microbatches;
  j["microbatch_group_size"] = opt.group_size;
  j["schedule"] = opt.schedule.empty() ? "(derived)" : opt.schedule;
  j["mtp_num_layers"] = model.mtp_num_layers;
  j["split"] = opt.split;
  for (const auto& r : runs) {
    const sim::SimResult& s = r.result;
    uint64_t peak = 0;
    for (const auto& rt : s.ranks) peak = std::max(peak, rt.peak_activation_bytes);
    const sim::StageCost& ml = r.stages[static_cast<size_t>(s.most_loaded_stage)];
    std::cout << fmt::format(
        "  {:<{}} {:>2} {:<13} {:>11.2f} {:>6.1f}% {:>9.3f} {:>13.2f} {:>9.3f}  {} ({}): {:.2f} "
        "ms{}\n",
        r.layout.text, w, r.layout.virtual_size, schedule::schedule_kind_name(r.schedule.kind),
        s.step_ms, 100.0 * s.bubble_fraction, s.rank_imbalance, gib(peak), ratio(s.step_ms),
        s.most_loaded_stage, ml.contents, ml.forward_ms + ml.backward_ms,
        par.cp > 1 || par.ep > 1 ? fmt::format(" (collectives {:.2f} ms, all-to-all {:.2f})",
                                               ml.forward_collective_ms + ml.backward_collective_ms,
                                               ml.forward_a2a_ms + ml.backward_a2a_ms)
                                 : "");
    nlohmann::json ranks = nlohmann::json::array();
    for (size_t p = 0; p < s.ranks.size(); ++p) {
      const auto& rt = s.ranks[p];
      ranks.push_back({{"pipeline_rank", p},
                       {"busy_ms", rt.busy_ms},
                       {"idle_ms", rt.idle_ms},
                       {"work_ms", rt.work_ms},
                       {"peak_activation_bytes", rt.peak_activation_bytes},
                       {"peak_in_flight", rt.peak_in_flight}});
    }
    j["layouts"].push_back(
        {{"layout", r.layout.text},
         {"virtual_size", r.layout.virtual_size},
         {"schedule", schedule::schedule_kind_name(r.schedule.kind)},
         {"step_ms", s.step_ms},
         {"bubble_fraction", s.bubble_fraction},
         {"rank_imbalance", s.rank_imbalance},
         {"most_loaded_stage", s.most_loaded_stage},
         {"most_loaded_stage_ms", ml.forward_ms + ml.backward_ms},
         {"most_loaded_stage_collective_ms", ml.forward_collective_ms + ml.backward_collective_ms},
         {"most_loaded_stage_all_to_all_ms", ml.forward_a2a_ms + ml.backward_a2a_ms},
         {"ratio_to_first", ratio(s.step_ms)},
         {"ranks", ranks}});
  }
  for (const auto& r : runs) {
    std::cout << fmt::format("\n# {}: per pipeline rank\n# {:>4} {:>10} {:>10} {:>10} {:>12}\n",
                             r.layout.text, "rank", "busy(ms)", "idle(ms)", "work(ms)",
                             "peak act(GiB)");
    for (size_t p = 0; p < r.result.ranks.size(); ++p) {
      const auto& rt = r.result.ranks[p];
      std::cout << fmt::format("  {:>4} {:>10.2f} {:>10.2f} {:>10.2f} {:>12.2f}\n", p, rt.busy_ms,
                               rt.idle_ms, rt.work_ms, gib(rt.peak_activation_bytes));
    }
  }
  if (!opt.json_path.empty()) write_file_atomically(opt.json_path, j.dump(2) + "\n");
  if (!opt.html_path.empty()) {
    std::string html =
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>mtp-harness simulate</title>"
        "</head><body style=\"font-family: sans-serif\">\n";
    html += fmt::format(
        "<h1>Simulated step: {}, P {}, M {}, CP {}, EP {}</h1>\n<p>costs {} ({}), link {}, "
        "collectives over {}</p>\n",
        report::markup::escape(model_name), opt.pipeline_size, opt.num_microbatches, par.cp, par.ep,
        report::markup::escape(opt.costs), report::markup::escape(costs.gpu),
        report::markup::escape(costs.link.name), report::markup::escape(collective_link.name));
    html +=
        "<table border=\"1\" cellpadding=\"4\"><tr><th>layout</th><th>schedule</th>"
        "<th>step (ms)</th><th>bubble</th><th>imbalance</th><th>vs first</th></tr>\n";
    for (const auto& r : runs) {
      html += fmt::format(
          "<tr><td><code>{}</code></td><td>{}</td><td>{:.2f}</td><td>{:.1f}%</td>"
          "<td>{:.3f}</td><td>{:.3f}</td></tr>\n",
          report::markup::escape(r.layout.text), schedule::schedule_kind_name(r.schedule.kind),
          r.result.step_ms, 100.0 * r.result.bubble_fraction, r.result.rank_imbalance,
          ratio(r.result.step_ms));
    }
    html += "</table>\n";
    for (const auto& r : runs) {
      html += "<h2><code>" + report::markup::escape(r.layout.text) + "</code></h2>\n";
      html += sim::timeline_svg(r.result, r.stages,
                                fmt::format("{} — {:.2f} ms", r.layout.text, r.result.step_ms));
    }
    html += "</body></html>\n";
    write_file_atomically(opt.html_path, html);
  }
  return 0;
}

}  // namespace mtp::cli
