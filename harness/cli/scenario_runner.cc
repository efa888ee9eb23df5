// Planning, training and evaluating a scenario's variants for check, equiv and golden
// (scenario_runner.h).

#include "harness/cli/scenario_runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/common/output_file.h"
#include "harness/common/temp_file.h"
#include "harness/common/terminal_text.h"
#include "harness/data/token_source.h"
#include "harness/engine/step_recorder.h"
#include "harness/engine/trainer.h"
#include "harness/gpu/gpu.h"
#include "harness/oracle/check/record_check.h"
#include "harness/record/record.h"
#include "harness/report/faster.h"
#include "harness/report/replicas.h"

namespace mtp::cli {
namespace fs = std::filesystem;

namespace {

/// `s` quoted for a POSIX shell when it holds anything but [A-Za-z0-9_./:=,+-].
std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNO"
                                       "PQRSTUVWXYZ0123456789_./:=,+-") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool embedded(const scenario::Scenario& sc) { return sc.source.rfind("<", 0) == 0; }

/// The steps of `variant`'s record that a resumed variant starts from, and that an expectation
/// compares under a class needing values
/// (ulp, tol, rel_l2: digests that differ cannot decide them; oracle: steps n − 1 and n of every
/// step n it checks), so that they are kept in full whatever the record mode and no verdict lacks
/// its data.
std::set<int64_t> value_steps(const scenario::Scenario& sc, const std::string& variant) {
  std::set<int64_t> out;
  // A resumed variant reads its source's weights and Adam state of the resume step in full.
  for (const auto& v : sc.variants) {
    if (v.resume_of == variant) out.insert(v.resume_step);
  }
  for (const auto& e : sc.expectations) {
    // replicas: values name the drifted element and its bits (digests would say only a block)
    if (!e.oracle() && !e.cls.needs_values() && e.judge != scenario::Judge::kReplicas) continue;
    if (std::find(e.variants.begin(), e.variants.end(), variant) == e.variants.end()) continue;
    if (e.oracle()) {  // step n against the oracle needs the weights of step n − 1 in full
      if (e.selection.steps.empty()) {
        for (int64_t s = 0; s <= sc.training.steps; ++s) out.insert(s);
      }
      for (int s : e.selection.steps) {
        out.insert(s - 1);
        out.insert(s);
      }
      continue;
    }
    if (e.selection.steps.empty()) {
      for (int64_t s = 0; s <= sc.training.steps; ++s) out.insert(s);
    } else {
      out.insert(e.selection.steps.begin(), e.selection.steps.end());
    }
  }
  return out;
}

/// A variant whose remaining steps will take longer than this is announced on stderr.
constexpr double kLongRunSeconds = 60.0;

/// kLongRunSeconds, or $MTP_LONG_RUN_SECONDS when it holds a finite number ≥ 0 (a test seam: 0
/// announces every run; anything else is ignored).
double long_run_seconds() {
  const char* v = std::getenv("MTP_LONG_RUN_SECONDS");
  if (v == nullptr || *v == '\0') return kLongRunSeconds;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  return *end == '\0' && std::isfinite(s) && s >= 0.0 ? s : kLongRunSeconds;
}

/// The progress of one variant on stderr: on a terminal, the line "\r[3/10] name  step 2/3
/// 4321 tokens/s  ETA 3 s"; anywhere (unless quiet), once after step 1, how long the rest of a
/// long variant will take.
class Progress {
 public:
  Progress(bool on, bool announce, size_t index, size_t count, const std::string& name,
           double tokens_per_step)
      : on_(on),
        announce_(announce),
        index_(index),
        count_(count),
        name_(name),
        tokens_(tokens_per_step) {}
  ~Progress() {
    if (on_ && printed_) raw_stderr() << "\r\033[K" << std::flush;
  }
  void step(int64_t step, int64_t steps, double seconds) {
    const double per_step = seconds / static_cast<double>(step);
    const double remaining = per_step * static_cast<double>(steps - step);
    if (announce_ && step == 1 && steps > 1 && remaining > long_run_seconds()) {
      if (printed_) raw_stderr() << "\r\033[K" << std::flush;
      std::cerr << fmt::format(
                       "# [{}/{}] {}: a long run: about {:.0f} s more ({} more steps at "
                       "{:.1f} s each, measured on step 1 with the setup)\n",
                       index_ + 1, count_, name_, remaining, steps - step, per_step)
                << std::flush;
    }
    if (!on_) return;
    raw_stderr() << "\r\033[K" << std::flush;
    std::cerr << fmt::format("[{}/{}] {}  step {}/{}  {:.0f} tokens/s  ETA {:.0f} s", index_ + 1,
                             count_, name_, step, steps, tokens_ / per_step, remaining)
              << std::flush;
    printed_ = true;
  }

 private:
  bool on_, announce_;
  size_t index_, count_;
  std::string name_;
  double tokens_;
  bool printed_ = false;
};

}  // namespace

void add_scenario_inputs(FileRoles& files, const scenario::Scenario& sc) {
  if (!sc.source.empty() && sc.source.front() != '<') files.input("the scenario", sc.source);
  if (sc.data.kind == "megatron") {
    files.input("the dataset index", sc.data.path_prefix + ".idx");
    files.input("the dataset", sc.data.path_prefix + ".bin");
  } else {
    files.input("the corpus", sc.data.path);
  }
  if (sc.training.init_from) files.input("the init_from record", sc.training.init_from->path);
  if (sc.training.resume_from) files.input("the resumed record", sc.training.resume_from->path);
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

InputError variant_error(const scenario::Scenario& sc, const std::string& name,
                         const std::string& what) {
  const std::string prefix = fmt::format("variant \"{}\": ", name);
  return InputError(fmt::format("{}: {}{}", sc.variant_location(name),
                                what.rfind(prefix, 0) == 0 ? "" : prefix, what));
}

std::vector<engine::RunPlan> plan_variants(const scenario::Scenario& sc,
                                           const std::set<std::string>& wanted) {
  for (const auto& v : wanted) {
    const config::VariantSpec& spec = sc.variant(v);  // unknown names are errors
    if (!spec.resume_of.empty() && !wanted.count(spec.resume_of)) {
      throw variant_error(sc, v,
                          fmt::format("resumes variant \"{}\": select it too (--variant {})",
                                      spec.resume_of, spec.resume_of));
    }
  }
  // Before anything is planned or made (a run directory, a record): a CUDA run needs a CUDA
  // build, which the planner does not ask (its rules are tested on every build).
  if (sc.training.device == config::Device::kCuda && !gpu::cuda_build()) {
    throw InputError(fmt::format(
        "{}: device = \"cuda\": this mtp-harness was built without CUDA LibTorch (build on the "
        "GPU machine with ci/gpu.sh, or run with --device cpu)",
        sc.position("training.device")));
  }
  std::vector<engine::RunPlan> plans;
  for (const auto& v : sc.variants) {
    if (!wanted.empty() && !wanted.count(v.name)) continue;
    try {
      plans.push_back(
          engine::plan_variant(sc.model, sc.training, v, *make_implementation(v.implementation)));
      for (int64_t s : value_steps(sc, v.name)) plans.back().training.dump_steps.insert(s);
    } catch (const layout::LayoutError& e) {
      throw InputError(fmt::format("{}: variant \"{}\": {}",
                                   sc.position("variant." + v.name + ".layout"), v.name, e.what()));
    } catch (const InputError& e) {
      throw variant_error(sc, v.name, e.what());
    }
  }
  return plans;
}

std::string record_scenario_mismatch(const std::string& path, const scenario::Scenario& sc) {
  try {
    const record::RecordReader r(path);
    const record::AttrMap attrs = r.attrs();
    const auto it = attrs.find("scenario_text");
    const std::string* text = it == attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (text == nullptr || text->empty()) {
      return "it holds no scenario text (made by an older mtp-harness or another tool)";
    }
    if (*text != sc.text) {
      const auto name = attrs.find("scenario");
      return fmt::format("it was made from another scenario text (scenario \"{}\")",
                         name != attrs.end() && std::get_if<std::string>(&name->second)
                             ? std::get<std::string>(name->second)
                             : "?");
    }
    return "";
  } catch (const record::RecordError& e) {
    return fmt::format("it is not a readable record ({})", e.what());
  }
}

std::string run_directory(const scenario::Scenario& sc, const std::string& out,
                          const std::string& flag) {
  if (!out.empty()) {
    check_output_directory(flag, out);
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(out, ec)) {
      if (entry.path().extension() != ".h5" || !entry.is_regular_file(ec)) continue;
      const std::string why = record_scenario_mismatch(entry.path().string(), sc);
      if (!why.empty()) {
        throw InputError(fmt::format(
            "{} {}: {} is there and {}; records of different scenarios never share a run "
            "directory: choose a new {} (or omit it for a fresh runs/{}/<time>), or remove "
            "the old records",
            flag, out, entry.path().filename().string(), why, flag, sc.name));
      }
    }
    return out;
  }
  const std::string parent = "runs/" + sc.name;
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  std::string name = stamp;
  std::error_code ec;
  fs::create_directories(parent, ec);
  for (int k = 2; fs::exists(parent + "/" + name, ec); ++k) name = fmt::format("{}-{}", stamp, k);
  const std::string dir = parent + "/" + name;
  check_output_directory("--out", dir);
  // runs/<scenario>/latest → the new directory, replaced atomically.
  const std::string tmp = fmt::format("{}/.latest.tmp-{}", parent, ::getpid());
  fs::remove(tmp, ec);
  fs::create_directory_symlink(name, tmp, ec);
  if (!ec) {
    fs::rename(tmp, parent + "/latest", ec);
    if (ec) fs::remove(tmp, ec);
  }
  return dir;
}

int prune_run_directories(const scenario::Scenario& sc, int keep, const std::string& current) {
  const std::string parent = "runs/" + sc.name;
  std::vector<std::string> runs;  // "20261202T154212Z" or "20261202T154212Z-2": sortable by time
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    // run_directory's names only: "20261202T154212Z" or "20261202T154212Z-<k>", k < 10^6.
    const std::string suffix = name.size() > 17 ? name.substr(17) : "";
    const bool stamp =
        name.size() >= 16 && name[8] == 'T' && name[15] == 'Z' &&
        name.substr(0, 8).find_first_not_of("0123456789") == std::string::npos &&
        name.substr(9, 6).find_first_not_of("0123456789") == std::string::npos &&
        (name.size() == 16 || (name[16] == '-' && !suffix.empty() && suffix.size() <= 6 &&
                               suffix.find_first_not_of("0123456789") == std::string::npos));
    if (stamp && e.is_directory(ec) && !e.is_symlink(ec)) runs.push_back(name);
  }
  std::sort(runs.begin(), runs.end(), [](const std::string& a, const std::string& b) {
    const std::string ka = a.substr(0, 16), kb = b.substr(0, 16);
    if (ka != kb) return ka < kb;
    const auto suffix = [](const std::string& s) {
      return s.size() > 17 ? std::stol(s.substr(17)) : 1L;  // digits only, at most 6: no throw
    };
    return suffix(a) < suffix(b);
  });
  int removed = 0;
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 1)) < runs.size(); ++i) {
    const std::string path = parent + "/" + runs[i];
    if (fs::path(path) == fs::path(current)) continue;
    remove_tree(path);
    ++removed;
  }
  return removed;
}

std::string retrain_command(const scenario::Scenario& sc, const std::string& variant,
                            const std::string& record, const std::string& extra_flags) {
  return fmt::format("mtp-harness run{} --variant {} --out {}{}",
                     embedded(sc) ? "" : " " + shell_quote(sc.source), shell_quote(variant),
                     shell_quote(record), extra_flags);
}

ScenarioRun train_variants(const scenario::Scenario& sc, const std::vector<engine::RunPlan>& plans,
                           const RunSettings& s) {
  data::open_token_source(sc.data);
  // Memory and disk for every variant, before the first one trains (all ranks of a variant run
  // in this process; records of every variant share the output directory's file system).
  uint64_t disk_budget = free_disk_bytes(s.out_dir);
  std::map<std::string, std::string> estimates;
  for (const auto& plan : plans) {
    const std::string& name = plan.variant.name;
    const engine::ResourceEstimate est = require_variant_resources(
        plan, *make_implementation(plan.variant.implementation), s.max_memory, true, 0, disk_budget,
        fmt::format("{}: variant \"{}\"", sc.variant_location(name), name));
    estimates[name] = est.describe();
  }
  size_t wname = 7, wlayout = 6;
  for (const auto& p : plans) {
    wname = std::max(wname, p.variant.name.size());
    wlayout = std::max(wlayout, p.layout.text.size());
  }
  if (s.print_rows) {
    std::cout << fmt::format(
        "# {:<{}} {:<10} {:<{}} {:>2} {:>2} {:>2} {:>2} {:>2} {:<13} {:<10} {:<6} {:>8} {:>14} "
        "{:>10}\n",
        "variant", wname, "impl", "layout", wlayout, "P", "V", "DP", "CP", "EP", "schedule",
        "standalone", "record", "wall(s)", "final loss", "record(B)");
  }
  ScenarioRun out;
  for (size_t i = 0; i < plans.size(); ++i) {
    engine::RunPlan plan = plans[i];
    const config::VariantSpec& v = plan.variant;
    std::string resume_flag;
    if (!v.resume_of.empty()) {  // continues the record its source variant just wrote
      const auto src = out.records.find(v.resume_of);
      MTP_INTERNAL_ASSERT(
          src != out.records.end(),
          fmt::format("variant {} trained before its source {}", v.name, v.resume_of));
      plan.training.resume_from = config::RecordRef{src->second, v.resume_step};
      plan.training.init_from.reset();
      resume_flag = " --resume " + shell_quote(plan.training.resume_from->text());
    }
    auto impl = make_implementation(v.implementation);
    engine::RunOptions ro;
    ro.record_path = s.out_dir + "/" + v.name + ".h5";
    ro.scenario_name = sc.name;
    ro.scenario_text = sc.text;
    const double tokens = static_cast<double>(plan.num_microbatches * plan.data_parallel_size() *
                                              plan.model.micro_batch_size * plan.model.seq_length);
    engine::RunResult rr;
    {
      Progress progress(s.progress, s.announce_long_runs, i, plans.size(), v.name, tokens);
      ro.on_step = [&progress](int64_t step, int64_t steps, double seconds) {
        progress.step(step, steps, seconds);
      };
      try {
        rr = engine::run_variant(plan, *impl, sc.data, ro);
      } catch (const InputError& e) {
        throw variant_error(sc, v.name, e.what());
      }
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
    run.context_parallel_size = plan.context_parallel_size();
    run.expert_parallel_size = plan.expert_parallel_size();
    run.optimizer = config::enum_name(v.optimizer);
    run.mtp_standalone = plan.layout.mtp_standalone;
    run.wall_seconds = rr.wall_seconds;
    run.final_total_loss = rr.total_loss.empty() ? 0.0 : rr.total_loss.back();
    run.record_bytes = static_cast<int64_t>(fs::file_size(ro.record_path));
    run.record_mode = config::enum_name(plan.record_mode);
    run.losses = report::read_losses(record::RecordReader(ro.record_path));
    // The re-train writes beside the record, never over it: the record is the evidence.
    run.retrain_command = retrain_command(sc, v.name, s.out_dir + "/" + v.name + ".retrain.h5",
                                          s.retrain_flags + resume_flag);
    if (s.print_rows) {
      std::cout << fmt::format(
          "  {:<{}} {:<10} {:<{}} {:>2} {:>2} {:>2} {:>2} {:>2} {:<13} {:<10} {:<6} {:>8.2f} "
          "{:>14.9g} {:>10}\n",
          run.name, wname, run.implementation, run.layout, wlayout, run.pipeline_size,
          run.virtual_size, run.data_parallel_size, run.context_parallel_size,
          run.expert_parallel_size, run.schedule, run.mtp_standalone ? "yes" : "no",
          run.record_mode, run.wall_seconds, run.final_total_loss, run.record_bytes);
      if (s.verbose) {
        std::cout << "      estimate: " << estimates[v.name] << "\n";
        for (const auto& line : rr.chunk_map) std::cout << "      " << line << "\n";
      }
      std::cout.flush();
    }
    out.records[v.name] = ro.record_path;
    out.runs.push_back(std::move(run));
  }
  return out;
}

std::vector<report::ExpectationResult> evaluate_expectations(const scenario::Scenario& sc,
                                                             const ScenarioRun& run) {
  std::vector<report::ExpectationResult> results;
  for (const auto& e : sc.expectations) {
    std::vector<std::string> missing;
    for (const auto& v : e.variants) {
      if (!run.records.count(v)) missing.push_back(v);
    }
    if (!missing.empty()) {
      results.push_back(report::skipped(e, std::move(missing)));
    } else if (e.oracle()) {
      results.push_back(oracle::evaluate_oracle_expectation(e, run.records));
    } else if (e.judge == scenario::Judge::kReplicas) {
      results.push_back(report::evaluate_replicas(e, run.records));
    } else if (e.judge == scenario::Judge::kFaster) {
      results.push_back(report::evaluate_faster(e, sc.model));
    } else {
      results.push_back(report::evaluate(e, run.records));
    }
    if (e.detects) report::apply_detection(e, results.back());
  }
  return results;
}

}  // namespace mtp::cli
