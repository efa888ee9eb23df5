// mtp-harness selftest: every planted bug of config/fault.h against the detectors of the
// compiled-in scenarios/faults.toml (commands.h).

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <map>

#include "harness/cli/commands.h"
#include "harness/cli/scenario_runner.h"
#include "harness/common/output_file.h"
#include "harness/config/fault.h"
#include "harness/report/report.h"
#include "harness/scenario/scenario.h"
#include "scenarios/embedded.h"

namespace mtp::cli {
namespace {

/// One row of the detection table.
struct Detection {
  std::string fault, source, expectation, variant, where;
  int step = 0;
  bool caught = false;
  double seconds = 0.0;  ///< training the faulty variant(s) + evaluating the expectation
};

/// The earliest failing comparison of a detector's pairs: its step and "group/name".
std::pair<int, std::string> earliest_failure(const report::ExpectationResult& r) {
  int step = 0;
  std::string where = "-";
  for (const auto& p : r.pairs) {
    const auto& fd = p.result.first_divergence;
    if (p.result.equal || !fd) continue;
    if (where == "-" || fd->step < step) {
      step = fd->step;
      where = fd->group + "/" + fd->name;
    }
  }
  return {step, where};
}

}  // namespace

int run_selftest(const SelftestOptions& opt) {
  scenario::Scenario sc =
      scenario::parse_scenario(scenarios::faults_scenario_text(), "<embedded faults scenario>");
  if (!opt.device.empty()) {
    sc.training.device = config::parse_enum<config::Device>(opt.device, "--device");
  }
  const std::vector<engine::RunPlan> plans = plan_variants(sc, {});
  RunSettings settings;
  settings.out_dir = run_directory(sc, opt.out_dir);
  settings.progress = !opt.quiet && stderr_is_terminal();
  settings.announce_long_runs = !opt.quiet;
  const std::string json_path = settings.out_dir + "/report.json";
  const std::string html_path = settings.out_dir + "/report.html";
  check_output_file("report", json_path);
  if (!opt.json_path.empty()) {
    // The detection table must not overwrite a record or a report of this run.
    check_output_file("--json", opt.json_path);
    check_not_same_file("--json", opt.json_path, "the report", json_path);
    check_not_same_file("--json", opt.json_path, "the HTML report", html_path);
    for (const auto& p : plans) {
      check_not_same_file("--json", opt.json_path,
                          "the record of variant \"" + p.variant.name + "\"",
                          settings.out_dir + "/" + p.variant.name + ".h5");
    }
  }
  std::cout << fmt::format(
      "# mtp-harness selftest: {} planted bugs (harness/config/fault.h) against the detectors "
      "of scenarios/faults.toml\n# run directory: {}\n",
      config::all_faults().size(), settings.out_dir);
  const ScenarioRun run = train_variants(sc, plans, settings);
  const std::vector<report::ExpectationResult> results = evaluate_expectations(sc, run);
  std::cout << "\n" << report::format_table(results);
  write_file_atomically(json_path, report::to_json(sc, run.runs, results).dump(2) + "\n");
  write_file_atomically(html_path, report::to_html(sc, run.runs, results));

  std::map<std::string, double> train_seconds;
  for (const auto& v : run.runs) train_seconds[v.name] = v.wall_seconds;
  std::vector<Detection> rows;
  bool all_hold = true;
  for (const auto& r : results) all_hold = all_hold && r.holds;
  for (const config::Fault f : config::all_faults()) {
    const auto& info = config::fault_info(f);
    bool any = false;
    for (const auto& r : results) {
      const scenario::Expectation& e = *r.expectation;
      if (e.detects != f) continue;
      any = true;
      Detection d{config::enum_name(f), std::string(info.source), e.name, "", "", 0, r.holds, 0.0};
      for (const auto& v : e.variants) {
        const auto& spec = sc.variant(v);
        if (spec.inject == f) d.variant = v;
        d.seconds += train_seconds[v];
      }
      for (const auto& p : r.pairs) d.seconds += p.seconds;
      std::tie(d.step, d.where) = earliest_failure(r);
      rows.push_back(d);
    }
    if (!any) {  // a gap: nothing is asked to catch it
      rows.push_back(
          {config::enum_name(f), std::string(info.source), "(none)", "", "-", 0, false, 0.0});
      all_hold = false;
    }
  }
  size_t wtensor = 40;
  for (const auto& d : rows) wtensor = std::max(wtensor, d.where.size());
  std::cout << fmt::format("\n# detection table\n# {:<36} {:<42} {:>4}  {:<{}} {:>7}  {}\n",
                           "fault", "caught by", "step", "tensor", wtensor, "seconds", "result");
  nlohmann::json j = nlohmann::json::array();
  for (const auto& d : rows) {
    std::cout << fmt::format("  {:<36} {:<42} {:>4}  {:<{}} {:>7.2f}  {}\n", d.fault, d.expectation,
                             d.step, d.where, wtensor, d.seconds, d.caught ? "CAUGHT" : "MISSED");
    j.push_back({{"fault", d.fault},
                 {"source", d.source},
                 {"expectation", d.expectation},
                 {"variant", d.variant},
                 {"step", d.step},
                 {"tensor", d.where},
                 {"seconds", d.seconds},
                 {"caught", d.caught}});
  }
  if (!opt.json_path.empty()) write_file_atomically(opt.json_path, j.dump(2) + "\n");
  std::cout << fmt::format("\n# verdict: {}; report: {}, {}\n",
                           all_hold ? "every planted bug caught where expected"
                                    : "NOT every planted bug caught where expected (MISSED rows, "
                                      "or a clean expectation failed: see the table)",
                           json_path, html_path);
  return all_hold ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
