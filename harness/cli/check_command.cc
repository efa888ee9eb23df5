// mtp-harness check: train a scenario's variants, evaluate its expectations, write the reports
// (commands.h).

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "harness/cli/commands.h"
#include "harness/cli/scenario_runner.h"
#include "harness/common/output_file.h"
#include "harness/common/utf8.h"
#include "harness/report/faster.h"
#include "harness/report/report.h"
#include "harness/scenario/scenario.h"
#include "scenarios/embedded.h"

namespace mtp::cli {
namespace fs = std::filesystem;

namespace {

/// The failing pairs in full: why they should hold, the comparison report, the owner of the
/// first divergence, the command that re-compares and the commands that re-train both variants.
void print_failures(const scenario::Scenario& sc,
                    const std::vector<report::ExpectationResult>& results, const ScenarioRun& run) {
  std::map<std::string, const report::VariantRun*> by_name;
  for (const auto& v : run.runs) by_name[v.name] = &v;
  for (const auto& r : results) {
    if (r.holds || r.skipped) continue;
    for (const auto& p : r.pairs) {
      if (p.holds || p.undecided) continue;
      if (r.expectation->judge == scenario::Judge::kFaster) {  // simulated, no records
        std::cout << fmt::format(
            "\n## {} FAILED: layout {} vs {}\n# why it should hold: {}\n# {}\n# re-simulate: {}\n",
            r.expectation->name, p.other, p.baseline, r.expectation->why, p.verdict,
            report::resimulate_command(*r.expectation, sc.source));
        continue;
      }
      if (r.expectation->judge == scenario::Judge::kReplicas) {  // one record, its copies
        std::cout << fmt::format(
            "\n## {} FAILED: {} (copies against the recorded copy)\n# why it "
            "should hold: {}\n",
            r.expectation->name, p.baseline, r.expectation->why);
        if (!p.note.empty()) std::cout << "# " << p.note << "\n";
        std::cout << compare::format_report(p.result, run.records.at(p.baseline), "recorded copy");
        continue;
      }
      const std::string& a = run.records.at(p.baseline);
      if (r.expectation->oracle()) {
        // A variant against the float64 program: the record names everything to re-check.
        std::cout << fmt::format(
            "\n## {} FAILED: {} vs the float64 oracle ({})\n# why it should hold: {}\n",
            r.expectation->name, p.baseline, p.other, r.expectation->why);
        if (!p.nonfinite.empty()) std::cout << "# non-finite value in " << p.nonfinite << "\n";
        std::cout << compare::format_report(p.result, a, p.other);
        if (const auto& fd = p.result.first_divergence) {
          const auto it = p.owners.find(fd->name);
          if (it != p.owners.end() && it->second.stage >= 0) {
            std::cout << fmt::format("# {}/{} is owned by {} in {}\n", fd->group, fd->name,
                                     it->second.describe(), p.baseline);
          }
        }
        const auto& steps = r.expectation->selection.steps;
        const int step = p.result.first_divergence ? p.result.first_divergence->step
                         : steps.empty()           ? 1
                                                   : *steps.begin();
        std::cout << fmt::format("# rerun: mtp-harness oracle {} --step {}\n# re-train {}: {}\n", a,
                                 step, p.baseline, by_name.at(p.baseline)->retrain_command);
        continue;
      }
      const std::string& b = run.records.at(p.other);
      std::cout << fmt::format("\n## {} FAILED: {} vs {} ({})\n# why it should hold: {}\n",
                               r.expectation->name, p.baseline, p.other,
                               r.expectation->class_text(), r.expectation->why);
      if (!p.nonfinite.empty()) std::cout << "# non-finite value in " << p.nonfinite << "\n";
      if (!p.note.empty()) std::cout << "# " << p.note << "\n";
      std::cout << compare::format_report(p.result, a, b);
      if (const auto& fd = p.result.first_divergence) {
        const auto it = p.owners.find(fd->name);
        if (it != p.owners.end() && it->second.stage >= 0) {
          std::cout << fmt::format("# {}/{} is owned by {} in {}\n", fd->group, fd->name,
                                   it->second.describe(), p.baseline);
        }
      }
      const auto& sel = r.expectation->selection;
      std::string args = fmt::format(" --class {} --records {}",
                                     r.expectation->cls.kind == compare::CompareClass::Kind::kDiffer
                                         ? "bitwise"
                                         : r.expectation->class_text(),
                                     fmt::join(sel.groups, ","));
      for (const auto& pat : sel.include) args += fmt::format(" --include '{}'", pat);
      for (const auto& pat : sel.exclude) args += fmt::format(" --exclude '{}'", pat);
      if (!sel.steps.empty()) args += fmt::format(" --steps {}", fmt::join(sel.steps, ","));
      std::cout << fmt::format("# rerun: mtp-harness compare {} {}{}\n", a, b, args);
      std::cout << fmt::format("# re-train {}: {}\n# re-train {}: {}\n", p.baseline,
                               by_name.at(p.baseline)->retrain_command, p.other,
                               by_name.at(p.other)->retrain_command);
    }
  }
}

int check(const CheckOptions& opt) {
  scenario::Scenario sc = opt.scenario.empty()
                              ? scenario::parse_scenario(scenarios::default_scenario_text(),
                                                         "<embedded default scenario>")
                              : scenario::load_scenario(opt.scenario);
  std::string retrain_flags;
  if (!opt.device.empty()) {
    sc.training.device = config::parse_enum<config::Device>(opt.device, "--device");
    retrain_flags += " --device " + opt.device;
  }
  apply_training_flags(opt.training, sc.training, sc.variants);
  retrain_flags += training_flags_text(opt.training);
  // Every output, before anything trains: a bad path fails now, not after the last variant.
  const char* in_json = "the JSON report holds it";
  require_utf8("scenario", sc.source, in_json);
  if (!opt.out_dir.empty()) require_utf8("--out", opt.out_dir, in_json);
  scenario::check_expectation_selections(sc);
  const std::set<std::string> wanted(opt.only_variants.begin(), opt.only_variants.end());
  // Every variant is planned (layout, schedule, implementation, overrides) before anything
  // trains, so a mistake in the last variant does not cost the others' run time.
  const std::vector<engine::RunPlan> plans = plan_variants(sc, wanted);

  RunSettings settings;
  if (opt.keep_last > 0 && !opt.out_dir.empty()) {
    throw InputError(
        "--keep-last prunes runs/<scenario>/, where check makes its run directories; "
        "it does not apply with --out");
  }
  // Every input and every output (defaults included) against each other, before the run
  // directory is made: no output may overwrite an input or another output.
  // (Without --out they go to a new directory, which no path given can name.)
  FileRoles files;
  add_scenario_inputs(files, sc);
  const std::string planned_dir = opt.out_dir.empty() ? std::string() : opt.out_dir;
  // Collisions only: an output may lie in the run directory, made below (then checked).
  auto planned = [&](const std::string& what, const std::string& given, const std::string& dflt) {
    if (!given.empty())
      files.planned_output(what, given);
    else if (!dflt.empty())
      files.planned_output(what + " (default)", dflt);
  };
  const std::string json_default = planned_dir.empty() ? "" : planned_dir + "/report.json";
  planned("--json", opt.json_path, json_default);
  planned("--html", opt.html_path,
          opt.json_path.empty() ? (planned_dir.empty() ? "" : planned_dir + "/report.html")
                                : fs::path(opt.json_path).replace_extension(".html").string());
  planned("--junit", opt.junit_path, "");
  for (const auto& p : plans) {
    if (!planned_dir.empty()) {
      files.planned_output("the record of variant \"" + p.variant.name + "\"",
                           planned_dir + "/" + p.variant.name + ".h5");
    }
  }
  settings.out_dir = run_directory(sc, opt.out_dir);
  require_utf8("--out", settings.out_dir, in_json);
  const std::string json_path =
      opt.json_path.empty() ? settings.out_dir + "/report.json" : opt.json_path;
  const std::string html_path = opt.html_path.empty()
                                    ? fs::path(json_path).replace_extension(".html").string()
                                    : opt.html_path;
  // The run directory exists now: each output there can be written.
  check_output_file("--json", json_path);
  check_output_file("--html", html_path);
  if (!opt.junit_path.empty()) check_output_file("--junit", opt.junit_path);
  for (const auto& p : plans) {
    check_output_file("record", settings.out_dir + "/" + p.variant.name + ".h5");
  }
  settings.max_memory = opt.max_memory;
  settings.verbose = opt.verbose;
  settings.progress = !opt.quiet && stderr_is_terminal();
  settings.announce_long_runs = !opt.quiet;
  settings.retrain_flags = retrain_flags;

  std::cout << fmt::format("# mtp-harness check: scenario \"{}\" ({})\n", sc.name, sc.source);
  if (!sc.description.empty()) std::cout << "# " << sc.description << "\n";
  std::cout << fmt::format(
      "# model: layers={} H={} heads={} ffn={} V={} s={} b={} D={} lambda={} {}\n",
      sc.model.num_layers, sc.model.hidden_size, sc.model.num_attention_heads,
      sc.model.ffn_hidden_size, sc.model.vocab_size, sc.model.seq_length, sc.model.micro_batch_size,
      sc.model.mtp_num_layers, sc.model.mtp_loss_scaling_factor,
      sc.model.untie_embeddings ? "untied" : "tied");
  std::cout << fmt::format(
      "# training: {} steps x {}, clip_grad={}, {}, device {}\n", sc.training.steps,
      sc.training.global_batch_size
          ? fmt::format("a global batch of {} samples", *sc.training.global_batch_size)
          : fmt::format("{} microbatches", sc.training.num_microbatches),
      sc.training.clip_grad, config::enum_name(sc.training.dtype),
      config::enum_name(sc.training.device));
  std::cout << fmt::format("# run directory: {}\n", settings.out_dir);
  const ScenarioRun run = train_variants(sc, plans, settings);
  const std::vector<report::ExpectationResult> results = evaluate_expectations(sc, run);

  std::cout << "\n" << report::format_table(results);
  print_failures(sc, results, run);
  int failed = 0, skipped = 0, undecided = 0;
  for (const auto& r : results) {
    skipped += r.skipped ? 1 : 0;
    undecided += r.undecided ? 1 : 0;
    failed += !r.skipped && !r.holds ? 1 : 0;
  }
  const int evaluated = static_cast<int>(results.size()) - skipped;
  write_file_atomically(json_path,
                        report::to_json(sc, run.runs, results)
                                .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                            "\n");
  write_file_atomically(html_path, report::to_html(sc, run.runs, results));
  if (!opt.junit_path.empty()) write_file_atomically(opt.junit_path, report::to_junit(sc, results));
  if (opt.keep_last > 0) {  // after the reports: a check that fails early prunes nothing
    const int removed = prune_run_directories(sc, opt.keep_last, settings.out_dir);
    if (removed > 0) {
      std::cout << fmt::format(
          "# --keep-last {}: removed the {} oldest run director{} of runs/{}/\n", opt.keep_last,
          removed, removed == 1 ? "y" : "ies", sc.name);
    }
  }
  std::cout << fmt::format(
      "\n# {} expectation(s): {} passed, {} failed, {} skipped ({} "
      "undecided, {} with variants not run); report: {}, {}\n",
      results.size(), evaluated - failed, failed, skipped, undecided, skipped - undecided,
      json_path, html_path);
  // The last line, as every command ends: what the exit code means, in words.
  if (failed > 0) {
    std::cout << fmt::format(
        "# verdict: FAILS: {} of {} evaluated expectation(s) failed (## … "
        "FAILED above)\n",
        failed, evaluated);
    return kExitMismatch;
  }
  if (undecided > 0 && !opt.allow_skipped) {
    // Never a pass for lack of data: an expectation the records cannot decide is not proven.
    std::cout << fmt::format(
        "# {} expectation(s) could not be decided from the records (see "
        "SKIP above); pass --allow-skipped to accept that\n# verdict: NOT PROVEN\n",
        undecided);
    return kExitMismatch;
  }
  if (evaluated == 0 && !results.empty() && !opt.allow_skipped) {
    std::cout << fmt::format(
        "# nothing was proven: every expectation compares a variant that was "
        "not run (--variant {}); run the variants they name, or pass "
        "--allow-skipped to accept a check that evaluates none\n# verdict: NOT PROVEN\n",
        fmt::join(opt.only_variants, " --variant "));
    return kExitMismatch;
  }
  std::cout << fmt::format(
      "# verdict: HOLDS: every evaluated expectation holds ({} of {}{})\n", evaluated,
      results.size(),
      skipped > 0 ? fmt::format("; {} skipped, accepted by --allow-skipped", skipped) : "");
  return kExitOk;
}

/// Whether the JUnit error report of a check that could not run may be written at --junit:
/// only when that path names no input (the scenario, its corpus or dataset, its records) and no
/// other output (explicit or default) and passes check_output_file. The refusal may be about the
/// --junit path itself (`--junit scenario.toml`, `--json x --junit x`): the error report must then
/// not overwrite what the refusal protected.
bool junit_error_may_be_written(const CheckOptions& opt) {
  try {
    FileRoles inputs;
    std::optional<scenario::Scenario> sc;
    if (!opt.scenario.empty()) {
      inputs.input("the scenario", opt.scenario);
      try {
        sc = scenario::load_scenario(opt.scenario);
      } catch (const std::exception&) {
        // A scenario that does not load names no further inputs.
      }
    }
    if (sc) add_scenario_inputs(inputs, *sc);
    inputs.output("--junit", opt.junit_path);  // throws on a collision with an input
    auto not_same = [&](const std::string& what, const std::string& path) {
      check_not_same_file("--junit", opt.junit_path, what, path);
    };
    not_same("--json", opt.json_path);
    not_same("--html", opt.html_path);
    if (!opt.json_path.empty()) {
      not_same("--html (default)", fs::path(opt.json_path).replace_extension(".html").string());
    }
    if (!opt.out_dir.empty()) {
      not_same("--json (default)", opt.out_dir + "/report.json");
      not_same("--html (default)", opt.out_dir + "/report.html");
      if (sc) {
        for (const auto& v : sc->variants) not_same("a record", opt.out_dir + "/" + v.name + ".h5");
      }
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int run_check(const CheckOptions& opt) {
  try {
    return check(opt);
  } catch (const std::exception& e) {
    // CI reads the JUnit file: a check that could not run says so there too (never a missing
    // or empty file that a CI tool could read as "no tests").
    if (!opt.junit_path.empty() && junit_error_may_be_written(opt)) {
      try {
        write_file_atomically(opt.junit_path, report::junit_error("mtp-harness check", e.what()));
      } catch (const std::exception&) {
        // The original error is what matters (a full disk, say): it is rethrown below.
      }
    }
    throw;
  }
}

}  // namespace mtp::cli
