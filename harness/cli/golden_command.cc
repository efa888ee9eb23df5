// mtp-harness golden check | update: today's records against the committed goldens
// (harness/golden/golden.h, commands.h).

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <variant>

#include "harness/cli/commands.h"
#include "harness/cli/scenario_runner.h"
#include "harness/common/output_file.h"
#include "harness/common/temp_file.h"
#include "harness/common/utf8.h"
#include "harness/golden/golden.h"
#include "harness/record/digest.h"
#include "harness/record/record.h"
#include "harness/scenario/scenario.h"

namespace mtp::cli {
namespace fs = std::filesystem;

namespace {

/// Rows of the summary (variant × step × group) printed without --detail.
constexpr size_t kMaxSummaryRows = 40;

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
                                                            const std::string& tmp, bool quiet) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!records_dir.empty()) {
    for (const auto& v : sc.variants) {
      const std::string path = records_dir + "/" + v.name + ".h5";
      std::error_code ec;
      const bool exists = fs::exists(path, ec);
      if (ec)
        throw InputError(fmt::format("--records {}: {}: {}", records_dir, path, ec.message()));
      if (!exists) {
        throw InputError(
            fmt::format("--records {}: no record of variant \"{}\" ({}); goldens "
                        "cover every variant of the scenario",
                        records_dir, v.name, path));
      }
      if (const std::string why = record_scenario_mismatch(path, sc); !why.empty()) {
        throw InputError(
            fmt::format("--records {}: {}: {}; goldens of scenario \"{}\" compare "
                        "only its own records",
                        records_dir, path, why, sc.name));
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

/// What changed, most telling first: the scenario text, the environment, then the tensors by
/// variant × step × group with the losses' values, then (detail) every tensor.
void print_changes(const golden::GoldenDiff& d, bool detail) {
  if (d.scenario_changed) {
    if (d.scenario_text_diff.empty()) {
      std::cout << "  the scenario text changed since the goldens were made (these goldens keep "
                   "no text to show the change)\n";
    } else {
      std::cout << "  the scenario text changed since the goldens were made:\n";
      for (const auto& line : d.scenario_text_diff) std::cout << "    " << line << "\n";
    }
  }
  for (const auto& f : d.fingerprint_bits) std::cout << "  environment: " << f << "\n";
  if (d.changed_groups.empty() && d.loss_changes.empty()) return;
  std::cout << "  changed tensors by variant, step and group (changed of recorded; the first):\n";
  size_t rows = 0;
  for (const auto& g : d.changed_groups) {
    if (!detail && rows++ == kMaxSummaryRows) {
      std::cout << fmt::format("    ... {} more groups (--detail lists them)\n",
                               d.changed_groups.size() - kMaxSummaryRows);
      break;
    }
    std::cout << fmt::format("    {} step {} {}: {} of {}, first {}\n", g.variant, g.step, g.group,
                             g.changed, g.total, g.first);
    if (g.group != record::group_name(record::Group::kLoss)) continue;
    for (const auto& l : d.loss_changes) {
      if (l.variant == g.variant && l.step == g.step) {
        std::cout << "      " << l.describe() << "\n";
      }
    }
  }
  // Losses whose digests did not change but whose numbers did (an edited golden file).
  for (const auto& l : d.loss_changes) {
    const bool shown =
        std::any_of(d.changed_groups.begin(), d.changed_groups.end(), [&](const auto& g) {
          return g.group == record::group_name(record::Group::kLoss) && g.variant == l.variant &&
                 g.step == l.step;
        });
    if (!shown)
      std::cout << fmt::format("    {} step {} loss: {}\n", l.variant, l.step, l.describe());
  }
  if (detail) {
    std::cout << "  every changed tensor:\n";
    for (const auto& c : d.changes) std::cout << "    " << c.describe() << "\n";
  } else if (!d.changes.empty()) {
    std::cout << fmt::format("  (--detail lists all {} changed tensors with their digests)\n",
                             d.changes.size());
  }
}

/// The scenario that made the records in `dir` (their scenario_text; every record there must
/// hold the same text).
scenario::Scenario scenario_of_records(const std::string& dir) {
  std::string text, first;
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".h5") files.push_back(e.path().string());
  }
  if (ec) throw InputError(fmt::format("--records {}: cannot list it: {}", dir, ec.message()));
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    const record::RecordReader r(path);
    const auto attrs = r.attrs();
    const auto it = attrs.find("scenario_text");
    const std::string* t = it == attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (t == nullptr || t->empty()) {
      throw InputError(
          fmt::format("--records {}: {} holds no scenario text; give the scenario "
                      "file",
                      dir, path));
    }
    if (first.empty()) {
      first = path;
      text = *t;
    } else if (*t != text) {
      throw InputError(
          fmt::format("--records {}: {} and {} were made from different scenario "
                      "texts; give the scenario file",
                      dir, first, path));
    }
  }
  if (first.empty()) throw InputError(fmt::format("--records {}: no record (.h5) there", dir));
  return scenario::parse_scenario(text, fmt::format("<scenario of {}>", first));
}

}  // namespace

int run_golden(const GoldenOptions& opt) {
  const bool from_records = opt.scenarios.empty() && !opt.records.empty();
  const std::vector<std::string> files = from_records            ? std::vector<std::string>{""}
                                         : opt.scenarios.empty() ? cpu_scenarios("scenarios")
                                                                 : opt.scenarios;
  if (!opt.records.empty() && files.size() != 1) {
    throw InputError(
        "--records names one scenario's records: give one scenario file, or none "
        "to take the scenario from the records");
  }
  if (opt.update && !opt.dry_run) check_output_directory("--golden-dir", opt.golden_dir);
  int differing = 0, checked = 0;
  std::set<std::string> notes_printed;  // an environment note once, not once per scenario
  for (const std::string& file_arg : files) {
    const scenario::Scenario sc =
        from_records ? scenario_of_records(opt.records) : scenario::load_scenario(file_arg);
    const std::string file = from_records ? "--records " + opt.records : file_arg;
    const std::string path = opt.golden_dir + "/" + sc.name + ".txt";
    if (opt.update && !opt.dry_run) {  // the goldens must not replace the scenario they are of
      FileRoles roles;
      add_scenario_inputs(roles, sc);
      roles.output("the golden file", path);
    }
    // The goldens are read before anything trains: missing or unreadable ones fail at once.
    std::error_code ec;
    const bool have = fs::exists(path, ec);  // a symlink loop: ELOOP, not "missing"
    if (ec) throw InputError(fmt::format("{}: {} ({})", printable(path), ec.message(), file));
    if (!opt.update && !have) {
      throw InputError(
          fmt::format("{}: no goldens for scenario \"{}\" ({}); make them with "
                      "`mtp-harness golden update {}`",
                      path, sc.name, file, file));
    }
    // Goldens of another scenario (a renamed file) are refused, naming the file's scenario line.
    const golden::GoldenFile old =
        have ? golden::read_golden_file(path, sc.name) : golden::GoldenFile{};
    const TempDirectory tmp("mtp-harness-golden");
    const auto records = records_of(sc, opt.records, tmp.path(), opt.quiet);
    const golden::GoldenFile now = golden::golden_from_records(sc.name, sc.text, records);
    const golden::GoldenDiff d = golden::diff_goldens(old, now);
    for (const auto& f : have ? d.fingerprint_info : std::vector<std::string>{}) {
      if (!notes_printed.insert(f).second) continue;
      std::cout << fmt::format(
          "# note: the environment differs from the goldens' (does not change bits; first seen "
          "in {}): {}\n",
          sc.name, f);
    }
    if (opt.update) {
      if (have && d.scenario_changed && !opt.accept_scenario_change) {
        std::cout << fmt::format(
            "golden update {}: refused: the scenario text changed since the "
            "goldens were made\n",
            sc.name);
        print_changes(d, opt.detail);
        throw InputError(fmt::format(
            "{}: the goldens were made from another text of scenario \"{}\" (above); re-making "
            "them would silently turn one test into another: pass --accept-scenario-change if "
            "that is the intent",
            path, sc.name));
      }
      const char* verb = opt.dry_run ? "would be written to" : "written to";
      if (!have) {
        std::cout << fmt::format(
            "golden update {}: new goldens of {} tensors ({} variants) {} "
            "{}\n",
            sc.name, d.tensors, sc.variants.size(), verb, path);
      } else if (d.equal() && d.fingerprint_bits.empty() && !d.scenario_changed &&
                 old.scenario_text.empty()) {
        // A version-1 file: the same digests, now with the scenario text and the losses.
        std::cout << fmt::format(
            "golden update {}: unchanged ({} tensors, {} variants); the "
            "scenario text and the losses added (format 2), {} {}\n",
            sc.name, d.tensors, sc.variants.size(), verb, path);
      } else if (d.equal() && d.loss_changes.empty() && d.fingerprint_bits.empty() &&
                 !d.scenario_changed) {
        std::cout << fmt::format("golden update {}: unchanged ({} tensors, {} variants)\n", sc.name,
                                 d.tensors, sc.variants.size());
        continue;
      } else {
        std::cout << fmt::format(
            "golden update {}: {} of {} tensors changed{}{}; {} {}\n", sc.name, d.changes.size(),
            d.tensors, d.scenario_changed ? "; the scenario text changed" : "",
            d.fingerprint_bits.empty() ? "" : "; the environment changed", verb, path);
        print_changes(d, opt.detail);
      }
      if (!opt.dry_run) write_file_atomically(path, golden::format_golden(now));
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
      std::cout << fmt::format(
          "# {}: comparing across an environment that can change bits "
          "(--allow-fingerprint-mismatch):{}\n",
          sc.name, what);
    }
    ++checked;
    if (d.equal() && d.loss_changes.empty()) {
      std::cout << fmt::format("golden check {}: EQUAL ({} tensors of {} variants, every step){}\n",
                               sc.name, d.tensors, sc.variants.size(),
                               d.scenario_changed ? "; note: the scenario text changed since the "
                                                    "goldens were made"
                                                  : "");
      if (d.scenario_changed) print_changes(d, opt.detail);
      continue;
    }
    ++differing;
    if (d.changes.empty()) {
      std::cout << fmt::format(
          "golden check {}: DIFFERENT: every digest is equal but {} recorded "
          "loss value(s) differ from {} (the goldens were edited?)\n",
          sc.name, d.loss_changes.size(), path);
    } else {
      const golden::TensorChange& first = d.changes.front();
      std::cout << fmt::format(
          "golden check {}: DIFFERENT: {} of {} tensors differ from {}; "
          "first: variant {} step {} {}/{}\n",
          sc.name, d.changes.size(), d.tensors, path, first.variant, first.step, first.group,
          first.name);
    }
    print_changes(d, opt.detail);
    std::cout << fmt::format(
        "# if the change is intended: mtp-harness golden update {} "
        "(--dry-run first prints what would change; commit {})\n",
        file, path);
  }
  if (!opt.update) {
    std::cout << (differing == 0
                      ? fmt::format("# verdict: EQUAL: every tensor of every step of {} "
                                    "scenario(s) equals its goldens\n",
                                    checked)
                      : fmt::format("# verdict: DIFFERENT: {} of {} scenario(s) differ from "
                                    "their goldens (above)\n",
                                    differing, checked));
  }
  return differing == 0 ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
