// mtp-harness golden check | update: today's records against the committed goldens
// (harness/golden/golden.h, commands.h).

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "harness/cli/commands.h"
#include "harness/cli/scenario_runner.h"
#include "harness/common/output_file.h"
#include "harness/common/temp_file.h"
#include "harness/golden/golden.h"
#include "harness/record/digest.h"
#include "harness/scenario/scenario.h"

namespace mtp::cli {
namespace fs = std::filesystem;

namespace {

/// Changed tensors listed per scenario before "… and N more".
constexpr size_t kMaxListed = 10;

/// Every scenario file of `dir` that trains on the CPU, by name.
std::vector<std::string> cpu_scenarios(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".toml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  std::vector<std::string> cpu;
  for (const auto& path : out) {
    if (scenario::load_scenario(path).training.device == config::Device::kCpu) cpu.push_back(path);
  }
  if (cpu.empty()) {
    throw InputError(fmt::format("no CPU scenario in {}/ (give the scenario files)", dir));
  }
  return cpu;
}

/// The variants' records of `sc`: those in `records_dir` (made by check), or a fresh
/// digest-only run into `tmp`.
std::vector<std::pair<std::string, std::string>> records_of(const scenario::Scenario& sc,
                                                            const std::string& records_dir,
                                                            const std::string& tmp,
                                                            bool quiet) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!records_dir.empty()) {
    for (const auto& v : sc.variants) {
      const std::string path = records_dir + "/" + v.name + ".h5";
      if (!fs::exists(path)) {
        throw InputError(fmt::format("--records {}: no record of variant \"{}\" ({}); goldens "
                                     "cover every variant of the scenario",
                                     records_dir, v.name, path));
      }
      if (const std::string why = record_scenario_mismatch(path, sc); !why.empty()) {
        throw InputError(fmt::format("--records {}: {}: {}; goldens of scenario \"{}\" compare "
                                     "only its own records", records_dir, path, why, sc.name));
      }
      out.emplace_back(v.name, path);
    }
    return out;
  }
  scenario::Scenario digest_only = sc;
  digest_only.training.record = config::RecordMode::kDigest;
  for (auto& v : digest_only.variants) v.record.reset();
  RunSettings s;
  s.out_dir = tmp;
  s.progress = !quiet && stderr_is_terminal();
  s.announce_long_runs = !quiet;
  s.print_rows = false;
  const ScenarioRun run = train_variants(digest_only, plan_variants(digest_only, {}), s);
  for (const auto& v : sc.variants) out.emplace_back(v.name, run.records.at(v.name));
  return out;
}

void print_changes(const golden::GoldenDiff& d) {
  for (size_t i = 0; i < d.changes.size() && i < kMaxListed; ++i) {
    std::cout << "  " << d.changes[i].describe() << "\n";
  }
  if (d.changes.size() > kMaxListed) {
    std::cout << fmt::format("  ... and {} more\n", d.changes.size() - kMaxListed);
  }
}

}  // namespace

int run_golden(const GoldenOptions& opt) {
  const std::vector<std::string> files =
      opt.scenarios.empty() ? cpu_scenarios("scenarios") : opt.scenarios;
  if (!opt.records.empty() && files.size() != 1) {
    throw InputError("--records names one scenario's records: give exactly one scenario file");
  }
  if (opt.update) check_output_directory("--golden-dir", opt.golden_dir);
  int differing = 0;
  for (const std::string& file : files) {
    const scenario::Scenario sc = scenario::load_scenario(file);
    const std::string path = opt.golden_dir + "/" + sc.name + ".txt";
    // The goldens are read before anything trains: missing or unreadable ones fail at once.
    const bool have = fs::exists(path);
    if (!opt.update && !have) {
      throw InputError(fmt::format("{}: no goldens for scenario \"{}\" ({}); make them with "
                                   "`mtp-harness golden update {}`",
                                   path, sc.name, file, file));
    }
    const golden::GoldenFile old = have ? golden::read_golden_file(path) : golden::GoldenFile{};
    const TempDirectory tmp("mtp-harness-golden");
    const auto records = records_of(sc, opt.records, tmp.path(), opt.quiet);
    const std::string text_digest =
        record::digest_bytes(sc.text.data(), sc.text.size(), 1).whole.hex();
    const golden::GoldenFile now = golden::golden_from_records(sc.name, text_digest, records);
    const golden::GoldenDiff d = golden::diff_goldens(old, now);
    for (const auto& f : have ? d.fingerprint_info : std::vector<std::string>{}) {
      std::cout << fmt::format("# {}: note: environment differs (does not change bits): {}\n",
                               sc.name, f);
    }
    if (opt.update) {
      if (!have) {
        std::cout << fmt::format("golden update {}: new goldens of {} tensors ({} variants) in "
                                 "{}\n",
                                 sc.name, d.tensors, sc.variants.size(), path);
      } else if (d.equal() && d.fingerprint_bits.empty() && !d.scenario_changed) {
        std::cout << fmt::format("golden update {}: unchanged ({} tensors, {} variants)\n",
                                 sc.name, d.tensors, sc.variants.size());
        continue;
      } else {
        std::cout << fmt::format("golden update {}: {} of {} tensors changed{}{}; written to {}\n",
                                 sc.name, d.changes.size(), d.tensors,
                                 d.scenario_changed ? "; the scenario text changed" : "",
                                 d.fingerprint_bits.empty() ? "" : "; the environment changed",
                                 path);
        for (const auto& f : d.fingerprint_bits) std::cout << "  environment: " << f << "\n";
        print_changes(d);
      }
      write_file_atomically(path, golden::format_golden(now));
      continue;
    }
    if (!d.fingerprint_bits.empty()) {
      std::string what;
      for (const auto& f : d.fingerprint_bits) what += "\n  " + f;
      if (!opt.allow_fingerprint_mismatch) {
        throw InputError(fmt::format(
            "{}: refusing to compare scenario \"{}\" with goldens made in an environment that "
            "can change bits:{}\n(--allow-fingerprint-mismatch compares anyway; `mtp-harness "
            "golden update` re-makes the goldens here)",
            path, sc.name, what));
      }
      std::cout << fmt::format("# {}: comparing across an environment that can change bits "
                               "(--allow-fingerprint-mismatch):{}\n",
                               sc.name, what);
    }
    if (d.equal()) {
      std::cout << fmt::format("golden check {}: EQUAL ({} tensors of {} variants, every step){}\n",
                               sc.name, d.tensors, sc.variants.size(),
                               d.scenario_changed ? "; note: the scenario text changed since the "
                                                    "goldens were made"
                                                  : "");
      continue;
    }
    ++differing;
    const golden::TensorChange& first = d.changes.front();
    std::cout << fmt::format("golden check {}: DIFFERENT: {} of {} tensors differ from {}; first: "
                             "variant {} step {} {}/{}\n",
                             sc.name, d.changes.size(), d.tensors, path, first.variant,
                             first.step, first.group, first.name);
    print_changes(d);
    std::cout << fmt::format("# if the change is intended: mtp-harness golden update {} (prints "
                             "what changed; commit {})\n",
                             file, path);
  }
  return differing == 0 ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
