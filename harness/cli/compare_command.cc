// mtp-harness info and compare (commands.h).

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <variant>

#include "harness/cli/commands.h"
#include "harness/cli/compare_html.h"
#include "harness/cli/localize.h"
#include "harness/common/output_file.h"
#include "harness/common/temp_file.h"
#include "harness/common/utf8.h"
#include "harness/compare/compare.h"
#include "harness/compare/compare_json.h"
#include "harness/report/report.h"
#include "harness/scenario/scenario.h"

namespace mtp::cli {
namespace {

std::string attr_text(const record::AttrValue& v) {
  return std::visit([](const auto& x) { return fmt::format("{}", x); }, v);
}

/// Settings that say what was trained (not how the run was laid out) and differ between the
/// records, so that a surprising difference is explained at once.
std::vector<std::string> setting_differences(const record::RecordReader& a,
                                             const record::RecordReader& b) {
  static const std::set<std::string> kLayout{"variant",
                                             "implementation",
                                             "layout",
                                             "P",
                                             "V",
                                             "microbatch_group_size",
                                             "schedule",
                                             "overlap_p2p_comm",
                                             "cuda_graphs",
                                             "context_parallel_size",
                                             "expert_model_parallel_size",
                                             "world_size",
                                             "mtp_standalone",
                                             "execution",
                                             "chunk_map",
                                             "git_revision",
                                             "device",
                                             "parallel_info",
                                             "scenario",
                                             "scenario_text",
                                             "param_stages",
                                             "stage_coords",
                                             "record_mode"};
  const auto aa = a.attrs(), ba = b.attrs();
  std::vector<std::string> notes;
  for (const auto& [k, v] : aa) {
    if (kLayout.count(k)) continue;
    auto it = ba.find(k);
    if (it == ba.end()) {
      notes.push_back(fmt::format("{} = {} only in A", k, attr_text(v)));
    } else if (it->second != v) {
      notes.push_back(fmt::format("{}: {} vs {}", k, attr_text(v), attr_text(it->second)));
    }
  }
  return notes;
}

}  // namespace

int run_info(const std::string& path, bool json) {
  record::RecordReader r(path);
  const std::vector<report::StepLoss> losses = report::read_losses(r);
  const auto nonfinite = r.first_nonfinite();
  if (json) {
    nlohmann::json j;
    j["schema_version"] = 1;
    j["path"] = path;
    j["attributes"] = nlohmann::json::object();
    for (const auto& [k, v] : r.attrs()) {
      std::visit([&](const auto& x) { j["attributes"][k] = x; }, v);
    }
    j["losses"] = nlohmann::json::array();
    for (const auto& l : losses) {
      j["losses"].push_back({{"step", l.step}, {"lm", l.lm}, {"mtp", l.mtp}, {"total", l.total}});
    }
    j["steps"] = nlohmann::json::array();
    for (int step : r.steps()) {
      nlohmann::json groups = nlohmann::json::object();
      for (const auto& g : r.groups(step)) {
        const auto names = r.names(step, g);
        size_t digest_only = 0;
        for (const auto& n : names) digest_only += r.info(step, g, n).stored ? 0 : 1;
        groups[g] = {{"tensors", names.size()}, {"digest_only", digest_only}};
      }
      j["steps"].push_back({{"step", step}, {"groups", groups}});
    }
    j["first_nonfinite"] = nonfinite ? nlohmann::json(nonfinite->describe()) : nlohmann::json();
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kExitOk;
  }
  std::cout << "# " << path << "\n";
  // What a reader wants first: the losses, and whether anything went non-finite.
  if (!losses.empty()) {
    std::string head = "# step  lm";
    for (size_t k = 0; k < losses.front().mtp.size(); ++k) head += fmt::format("  mtp_{}", k + 1);
    std::cout << "losses:\n" << head << "  total\n";
    for (const auto& l : losses) {
      std::string row = fmt::format("  {:>4}  {:.9g}", l.step, l.lm);
      for (double m : l.mtp) row += fmt::format("  {:.9g}", m);
      std::cout << row << fmt::format("  {:.9g}\n", l.total);
    }
  }
  if (nonfinite) std::cout << "first non-finite value: " << nonfinite->describe() << "\n";
  for (const auto& [k, v] : r.attrs()) {
    std::string value = attr_text(v);
    if (value.find('\n') != std::string::npos) value = "\n    " + value;
    for (size_t pos = 0; (pos = value.find('\n', pos + 1)) != std::string::npos;) {
      value.insert(pos + 1, "    ");
    }
    std::cout << fmt::format("{} = {}\n", k, value);
  }
  const auto steps = r.steps();
  std::cout << fmt::format("steps: {}\n", fmt::join(steps, " "));
  // Every step: its groups, their tensor counts and how many of those are digest-only.
  for (int step : steps) {
    std::vector<std::string> parts;
    for (const auto& g : r.groups(step)) {
      const auto names = r.names(step, g);
      size_t digest_only = 0;
      for (const auto& n : names) digest_only += r.info(step, g, n).stored ? 0 : 1;
      parts.push_back(
          fmt::format("{} {}{}", g, names.size(),
                      digest_only ? fmt::format(" ({} digest-only)", digest_only) : ""));
    }
    std::cout << fmt::format("  step {}: {}\n", step, fmt::join(parts, ", "));
  }
  return kExitOk;
}

int run_compare(const CompareOptions& opt) {
  const auto cls = compare::CompareClass::parse(opt.cls);
  if (!opt.json_path.empty()) {
    check_output_file("--json", opt.json_path);
    require_utf8("record", opt.a, "the JSON result holds it");
    require_utf8("record", opt.b, "the JSON result holds it");
    check_not_same_file("--json", opt.json_path, "record A", opt.a);
    check_not_same_file("--json", opt.json_path, "record B", opt.b);
  }
  if (!opt.html_path.empty()) {
    check_output_file("--html", opt.html_path);
    check_not_same_file("--html", opt.html_path, "record A", opt.a);
    check_not_same_file("--html", opt.html_path, "record B", opt.b);
    if (!opt.json_path.empty()) {
      check_not_same_file("--html", opt.html_path, "--json", opt.json_path);
    }
  }
  record::RecordReader a(opt.a);
  record::RecordReader b(opt.b);
  compare::Selection sel;
  sel.groups = opt.records;
  for (const auto& g : sel.groups) {
    if (!record::parse_group(g)) {
      throw InputError(fmt::format("--records: unknown record \"{}\" (accepted: {})", g,
                                   fmt::join(record::record_groups(), ", ")));
    }
  }
  sel.include = opt.include;
  sel.exclude = opt.exclude;
  int max_step = 0;
  for (int s : a.steps()) max_step = std::max(max_step, s);
  for (int s : b.steps()) max_step = std::max(max_step, s);
  sel.steps = scenario::parse_step_spec(opt.steps, max_step);
  compare::CompareOptions copt;
  copt.ignore_digests = opt.ignore_digests;
  const compare::CompareResult r = compare::compare_records_with(a, b, cls, sel, copt);
  const std::vector<std::string> notes = setting_differences(a, b);
  if (!notes.empty()) {
    std::cout << "note: the records' settings differ: " << fmt::format("{}", fmt::join(notes, "; "))
              << "\n";
  }
  std::cout << compare::format_report(r, opt.a, opt.b, opt.max_rows);
  nlohmann::json j = compare::to_json(r);
  j["a"] = opt.a;
  j["b"] = opt.b;
  j["setting_differences"] = notes;
  j["report"] = compare::format_report(r, opt.a, opt.b, opt.max_rows);
  // One verdict at the end, whatever --localize did: EQUAL, DIFFERENT or UNDECIDED.
  bool holds = r.holds();
  bool undecided = r.undecided();
  std::string verdict = compare::verdict_text(r);
  const auto& fd = r.first_divergence;
  std::set<int> steps;  // what --localize re-trains: the undecided tensors' steps, else the first
  if (undecided) {
    for (const auto& d : r.tensors) {
      if (d.undecided) steps.insert(d.step);
    }
  } else if (fd && fd->first_block >= 0) {
    steps.insert(fd->step);
  }
  if (opt.localize && !steps.empty()) {
    // Digest-only records: re-train both variants with those steps in full.
    std::cout << fmt::format(
        "# --localize: re-training both variants through step {} with "
        "step(s) {} in full\n",
        *steps.rbegin(), fmt::join(steps, ","));
    const TempDirectory dir("mtp-harness-localize");
    std::optional<Localized> tried;
    try {
      tried = localize(opt.a, opt.b, steps, cls, sel, dir.path());
    } catch (const InputError& e) {
      // The records' own verdict stands; --localize only could not add to it.
      std::cout << "# --localize could not re-train the variants: " << e.what() << "\n";
      j["localized"] = {{"error", e.what()}};
    }
    if (tried) {
      const Localized& loc = *tried;
      std::cout << loc.notes
                << compare::format_report(loc.result, loc.a_rerun, loc.b_rerun, opt.max_rows);
      j["localized"] = compare::to_json(loc.result);
      j["localized"]["notes"] = loc.notes;
      j["localized"]["reproduced"] = loc.reproduced;
      if (undecided && loc.reproduced) {
        // Every tensor outside these steps was decided by the records; these steps, by the
        // re-runs that reproduce them bit for bit.
        undecided = loc.result.undecided();
        holds = loc.result.holds();
        verdict = fmt::format("{} (step(s) {} re-trained in full: {})",
                              holds ? "the records hold " + cls.to_string()
                                    : "the records do not hold " + cls.to_string(),
                              fmt::join(steps, ","), compare::verdict_text(loc.result));
      } else if (undecided) {
        verdict += "; --localize could not decide it: the re-runs do not reproduce the records";
      } else if (loc.result.first_divergence) {
        verdict += "; the element: " + loc.result.first_divergence->describe();
      }
    } else if (undecided) {
      verdict += "; --localize could not re-train the variants (above)";
    }
  } else if (opt.localize) {
    std::cout << "# --localize: nothing to localise (the first divergence "
              << (fd ? "already names its element" : "does not exist") << ")\n";
  }
  // NaN equals NaN bit for bit: records that hold a non-finite value never compare as a pass.
  std::vector<std::string> nonfinite;
  if (const auto nf = a.first_nonfinite()) nonfinite.push_back("A: " + nf->describe());
  if (const auto nf = b.first_nonfinite()) nonfinite.push_back("B: " + nf->describe());
  if (!nonfinite.empty()) {
    j["nonfinite"] = nonfinite;
    if (!opt.allow_nonfinite) {
      holds = false;
      undecided = false;
      verdict = fmt::format("non-finite value in {} (--allow-nonfinite compares anyway)",
                            fmt::join(nonfinite, "; "));
    }
  }
  const bool differ = cls.kind == compare::CompareClass::Kind::kDiffer;
  const char* word = undecided ? "UNDECIDED"
                     : holds   ? (differ ? "DIFFERENT, as the negative control expects" : "EQUAL")
                     : !nonfinite.empty() && !opt.allow_nonfinite ? "NOT FINITE"
                     : differ ? "EQUAL: the negative control fails"
                              : "DIFFERENT";
  std::cout << fmt::format("# verdict: {} ({}): {}\n", word, cls.to_string(), verdict);
  if (undecided && !opt.localize) {
    std::cout << "# the values the class needs are not in the records: --localize re-trains "
                 "those steps in full to decide\n";
  }
  j["verdict"] = {{"result", undecided ? "undecided"
                             : holds   ? "holds"
                                       : "fails"},
                  {"text", verdict}};
  if (!opt.json_path.empty()) {
    write_file_atomically(opt.json_path,
                          j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  if (!opt.html_path.empty()) {
    const CompareVerdict v{
        holds, undecided, opt.allow_nonfinite ? "" : fmt::format("{}", fmt::join(nonfinite, "; "))};
    write_file_atomically(opt.html_path, compare_html(opt.a, opt.b, cls, sel, r, v));
  }
  return holds ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
