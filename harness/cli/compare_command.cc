#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <variant>
#include <iostream>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/common/output_file.h"
#include "harness/common/utf8.h"
#include "harness/compare/compare.h"
#include "harness/scenario/scenario.h"

namespace mtp::cli {

int run_info(const std::string& path) {
  record::RecordReader r(path);
  std::cout << "# " << path << "\n";
  for (const auto& [k, v] : r.attrs()) {
    std::string value = std::visit([](const auto& x) { return fmt::format("{}", x); }, v);
    if (value.find('\n') != std::string::npos) value = "\n    " + value;
    for (size_t pos = 0; (pos = value.find('\n', pos + 1)) != std::string::npos;) {
      value.insert(pos + 1, "    ");
    }
    std::cout << fmt::format("{} = {}\n", k, value);
  }
  const auto steps = r.steps();
  std::cout << fmt::format("steps: {}\n", fmt::join(steps, " "));
  if (!steps.empty()) {
    for (const auto& g : r.groups(steps.back())) {
      std::cout << fmt::format("  step {} {}: {} tensors\n", steps.back(), g, r.names(steps.back(), g).size());
    }
  }
  return kExitOk;
}

int run_compare(const CompareOptions& opt) {
  const auto cls = compare::CompareClass::parse(opt.cls);
  if (!opt.json_path.empty()) {
    check_output_file("--json", opt.json_path);
    require_utf8("record", opt.a, "the JSON result holds it");
    require_utf8("record", opt.b, "the JSON result holds it");
  }
  record::RecordReader a(opt.a);
  record::RecordReader b(opt.b);
  compare::Selection sel;
  sel.groups = opt.records;
  for (const auto& g : sel.groups) {
    const auto& known = record::record_groups();
    if (std::find(known.begin(), known.end(), g) == known.end()) {
      throw InputError(fmt::format("--records: unknown record \"{}\" (accepted: {})", g,
                                   fmt::join(known, ", ")));
    }
  }
  sel.include = opt.include;
  sel.exclude = opt.exclude;
  int max_step = 0;
  for (int s : a.steps()) max_step = std::max(max_step, s);
  for (int s : b.steps()) max_step = std::max(max_step, s);
  sel.steps = scenario::parse_step_spec(opt.steps, max_step);
  auto r = compare::compare_records(a, b, cls, sel);
  // Attributes that say what was trained (not how the run was laid out) and differ: printed so
  // that a surprising difference is explained at once.
  static const std::set<std::string> kLayout{
      "variant", "implementation", "layout", "P", "V", "microbatch_group_size", "schedule",
      "overlap_p2p_comm", "mtp_standalone", "execution", "chunk_map", "git_revision", "device",
      "parallel_info", "scenario"};
  const auto aa = a.attrs(), ba = b.attrs();
  std::vector<std::string> notes;
  for (const auto& [k, v] : aa) {
    if (kLayout.count(k)) continue;
    auto it = ba.find(k);
    auto str = [](const record::AttrValue& x) { return std::visit([](const auto& y) { return fmt::format("{}", y); }, x); };
    if (it == ba.end()) notes.push_back(fmt::format("{} = {} only in A", k, str(v)));
    else if (it->second != v) notes.push_back(fmt::format("{}: {} vs {}", k, str(v), str(it->second)));
  }
  if (!notes.empty()) {
    std::cout << "note: the records' settings differ: " << fmt::format("{}", fmt::join(notes, "; ")) << "\n";
  }
  std::cout << compare::format_report(r, opt.a, opt.b, opt.max_rows);
  if (!opt.json_path.empty()) {
    nlohmann::json j{{"a", opt.a}, {"b", opt.b}, {"class", cls.to_string()}, {"equal", r.equal},
                     {"holds", r.holds()}, {"tensors_compared", r.tensors_compared},
                     {"structural", r.structural}};
    if (r.first_divergence) {
      const auto& fd = *r.first_divergence;
      j["first_divergence"] = {{"step", fd.step}, {"group", fd.group}, {"name", fd.name},
                               {"structural", fd.structural}, {"index", fd.first_index},
                               {"coord", fd.first_coord}, {"a", fd.a_value}, {"b", fd.b_value},
                               {"a_bits", fd.a_bits}, {"b_bits", fd.b_bits},
                               {"mismatches", fd.mismatches}, {"max_ulp", fd.max_ulp}};
    }
    write_file_atomically(opt.json_path,
                          j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return r.holds() ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
