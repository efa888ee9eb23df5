#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "harness/cli/commands.h"
#include "harness/common/output_file.h"
#include "harness/common/utf8.h"
#include "harness/data/token_source.h"
#include "harness/engine/plan.h"
#include "harness/engine/trainer.h"
#include "harness/report/report.h"
#include "harness/scenario/scenario.h"
#include "scenarios/embedded.h"

namespace mtp::cli {
namespace fs = std::filesystem;

int run_check(const CheckOptions& opt) {
  scenario::Scenario sc = opt.scenario.empty()
                              ? scenario::parse_scenario(scenarios::default_scenario_text(),
                                                         "<embedded default scenario>")
                              : scenario::load_scenario(opt.scenario);
  if (!opt.device.empty()) {
    sc.training.device = config::parse_enum<config::Device>(opt.device, "--device");
  }
  apply_training_flags(opt.training, sc.training);
  const std::string out_dir = opt.out_dir.empty() ? "runs/" + sc.name : opt.out_dir;
  // Every output, before anything trains: a bad path fails now, not after the last variant.
  const char* in_json = "the JSON report holds it";
  require_utf8("scenario", sc.source, in_json);
  require_utf8("--out", out_dir, in_json);
  check_output_directory("--out", out_dir);
  const std::string json_path = opt.json_path.empty() ? out_dir + "/report.json" : opt.json_path;
  check_output_file("--json", json_path);
  if (!opt.junit_path.empty()) check_output_file("--junit", opt.junit_path);
  for (const auto& v : sc.variants) check_output_file("record", out_dir + "/" + v.name + ".h5");
  scenario::check_expectation_selections(sc);

  std::set<std::string> wanted(opt.only_variants.begin(), opt.only_variants.end());
  for (const auto& v : wanted) sc.variant(v);  // unknown names are errors
  // Every variant is planned (layout, schedule, implementation, overrides) and the data file is
  // opened before anything trains, so a mistake in the last variant does not cost the others'
  // run time.
  std::vector<engine::RunPlan> plans;
  for (const auto& v : sc.variants) {
    if (!wanted.empty() && !wanted.count(v.name)) continue;
    try {
      plans.push_back(engine::plan_variant(sc.model, sc.training, v,
                                           *make_implementation(v.implementation)));
    } catch (const layout::LayoutError& e) {
      throw InputError(fmt::format("{}: variant \"{}\": {}",
                                   sc.position("variant." + v.name + ".layout"), v.name, e.what()));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: variant \"{}\": {}", sc.variant_location(v.name), v.name,
                                   e.what()));
    }
  }
  data::open_token_source(sc.data);
  // Memory and disk for every variant, before the first one trains (all ranks of a variant run
  // in this process; records of every variant share the output directory's file system).
  uint64_t disk_budget = free_disk_bytes(out_dir);
  std::map<std::string, std::string> estimates;
  for (const auto& plan : plans) {
    const std::string& name = plan.variant.name;
    const engine::ResourceEstimate est = require_variant_resources(
        plan, *make_implementation(plan.variant.implementation), opt.max_memory, true, 0,
        disk_budget, fmt::format("{}: variant \"{}\"", sc.variant_location(name), name));
    estimates[name] = est.describe();
  }

  std::cout << fmt::format("# mtp-harness check: scenario \"{}\" ({})\n", sc.name, sc.source);
  if (!sc.description.empty()) std::cout << "# " << sc.description << "\n";
  std::cout << fmt::format("# model: layers={} H={} heads={} ffn={} V={} s={} b={} D={} lambda={} {}\n",
                           sc.model.num_layers, sc.model.hidden_size, sc.model.num_attention_heads,
                           sc.model.ffn_hidden_size, sc.model.vocab_size, sc.model.seq_length,
                           sc.model.micro_batch_size, sc.model.mtp_num_layers,
                           sc.model.mtp_loss_scaling_factor,
                           sc.model.untie_embeddings ? "untied" : "tied");
  std::cout << fmt::format("# training: {} steps x {}, clip_grad={}, {}, device {}\n",
                           sc.training.steps,
                           sc.training.global_batch_size
                               ? fmt::format("a global batch of {} samples",
                                             *sc.training.global_batch_size)
                               : fmt::format("{} microbatches", sc.training.num_microbatches),
                           sc.training.clip_grad,
                           config::enum_name(sc.training.dtype),
                           config::enum_name(sc.training.device));
  size_t wname = 7, wlayout = 6;
  for (const auto& v : sc.variants) {
    wname = std::max(wname, v.name.size());
    wlayout = std::max(wlayout, v.layout.empty() ? size_t{16} : v.layout.size());
  }
  std::cout << fmt::format("# {:<{}} {:<10} {:<{}} {:>2} {:>2} {:>2} {:<13} {:<10} {:>8} {:>14} {:>10}\n",
                           "variant", wname, "impl", "layout", wlayout, "P", "V", "DP", "schedule",
                           "standalone", "wall(s)", "final loss", "record(B)");
  std::map<std::string, std::string> records;
  std::vector<report::VariantRun> runs;
  for (const auto& plan : plans) {
    const config::VariantSpec& v = plan.variant;
    auto impl = make_implementation(v.implementation);
    engine::RunOptions ro;
    ro.record_path = out_dir + "/" + v.name + ".h5";
    ro.scenario_name = sc.name;
    engine::RunResult rr;
    try {
      rr = engine::run_variant(plan, *impl, sc.data, ro);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: variant \"{}\": {}", sc.variant_location(v.name), v.name,
                                   e.what()));
    }
    report::VariantRun run;
    run.name = v.name;
    run.implementation = impl->name();
    run.layout = plan.layout.text;
    run.schedule = schedule::schedule_kind_name(plan.schedule.kind);
    run.record_path = ro.record_path;
    run.pipeline_size = plan.layout.pipeline_size;
    run.virtual_size = plan.layout.virtual_size;
    run.data_parallel_size = plan.data_parallel_size();
    run.optimizer = config::enum_name(v.optimizer);
    run.mtp_standalone = plan.layout.mtp_standalone;
    run.wall_seconds = rr.wall_seconds;
    run.final_total_loss = rr.total_loss.back();
    run.record_bytes = static_cast<int64_t>(fs::file_size(ro.record_path));
    std::cout << fmt::format("  {:<{}} {:<10} {:<{}} {:>2} {:>2} {:>2} {:<13} {:<10} {:>8.2f} {:>14.9g} {:>10}\n",
                             run.name, wname, run.implementation, run.layout, wlayout, run.pipeline_size,
                             run.virtual_size, run.data_parallel_size, run.schedule,
                             run.mtp_standalone ? "yes" : "no",
                             run.wall_seconds, run.final_total_loss, run.record_bytes);
    if (opt.verbose) {
      std::cout << "      estimate: " << estimates[v.name] << "\n";
      for (const auto& line : rr.chunk_map) std::cout << "      " << line << "\n";
    }
    std::cout.flush();
    records[v.name] = ro.record_path;
    runs.push_back(run);
  }

  std::vector<report::ExpectationResult> results;
  int skipped = 0;
  for (const auto& e : sc.expectations) {
    bool have_all = true;
    for (const auto& v : e.variants) have_all = have_all && records.count(v);
    if (!have_all) {
      ++skipped;
      continue;
    }
    results.push_back(report::evaluate(e, records));
  }
  std::cout << "\n" << report::format_table(results);
  int failed = 0;
  for (const auto& r : results) failed += r.holds ? 0 : 1;
  for (const auto& r : results) {
    if (r.holds) continue;
    for (const auto& p : r.pairs) {
      if (p.holds) continue;
      std::cout << fmt::format("\n## {} FAILED: {} vs {} ({})\n# why it should hold: {}\n",
                               r.expectation->name, p.baseline, p.other,
                               r.expectation->cls.to_string(), r.expectation->why);
      if (!p.note.empty()) std::cout << "# " << p.note << "\n";
      std::cout << compare::format_report(p.result, records[p.baseline], records[p.other]);
      const auto& sel = r.expectation->selection;
      std::string args = fmt::format(" --class {} --records {}",
                                     r.expectation->cls.kind == compare::CompareClass::Kind::kDiffer
                                         ? "bitwise" : r.expectation->cls.to_string(),
                                     fmt::join(sel.groups, ","));
      for (const auto& pat : sel.include) args += fmt::format(" --include '{}'", pat);
      for (const auto& pat : sel.exclude) args += fmt::format(" --exclude '{}'", pat);
      if (!sel.steps.empty()) args += fmt::format(" --steps {}", fmt::join(sel.steps, ","));
      std::cout << fmt::format("# rerun: mtp-harness compare {} {}{}\n", records[p.baseline],
                               records[p.other], args);
    }
  }
  write_file_atomically(json_path,
                        report::to_json(sc, runs, results)
                                .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                            "\n");
  if (!opt.junit_path.empty()) write_file_atomically(opt.junit_path, report::to_junit(sc, results));
  std::cout << fmt::format("\n# {} expectation(s): {} passed, {} failed{}; report: {}\n",
                           results.size(), results.size() - failed, failed,
                           skipped ? fmt::format(", {} skipped (variants not run)", skipped) : "",
                           json_path);
  return failed == 0 ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
