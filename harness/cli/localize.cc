// compare --localize: re-train two digest-only records' variants with the divergent step in
// full (localize.h).

#include "harness/cli/localize.h"

#include <fmt/format.h>

#include "harness/cli/commands.h"
#include "harness/engine/trainer.h"
#include "harness/record/record.h"
#include "harness/scenario/scenario.h"

namespace mtp::cli {
namespace {

std::string string_attr(const record::AttrMap& attrs, const std::string& key,
                        const std::string& path) {
  const auto it = attrs.find(key);
  if (it == attrs.end() || std::get_if<std::string>(&it->second) == nullptr ||
      std::get<std::string>(it->second).empty()) {
    throw InputError(
        fmt::format("{}: --localize re-trains the record's variant, but the record "
                    "has no (or an empty) string attribute '{}' (a record of an older "
                    "mtp-harness, or not made by check/run)",
                    path, key));
  }
  return std::get<std::string>(it->second);
}

/// Re-trains the variant that made `path` through the last of `steps`, keeping `steps` in full,
/// into `out`.
void rerun(const std::string& path, const std::set<int>& steps, const std::string& out) {
  const record::RecordReader rec(path);
  const record::AttrMap attrs = rec.attrs();
  scenario::Scenario sc = scenario::parse_scenario(string_attr(attrs, "scenario_text", path),
                                                   fmt::format("<scenario of {}>", path));
  const std::string variant = string_attr(attrs, "variant", path);
  sc.training.device =
      config::parse_enum<config::Device>(string_attr(attrs, "device", path), "device");
  for (const char* key : {"init_from", "resumed_from"}) {
    const auto p = attrs.find(key);
    const auto s = attrs.find(std::string(key) + "_step");
    if (p == attrs.end() || s == attrs.end()) continue;
    config::RecordRef ref{std::get<std::string>(p->second), std::get<int64_t>(s->second)};
    (std::string(key) == "init_from" ? sc.training.init_from : sc.training.resume_from) = ref;
  }
  sc.training.steps = *steps.rbegin();
  sc.training.record = config::RecordMode::kDigest;
  sc.training.dump_steps = std::set<int64_t>(steps.begin(), steps.end());
  config::VariantSpec v = sc.variant(variant);
  v.record.reset();
  auto impl = make_implementation(v.implementation);
  const engine::RunPlan plan = engine::plan_variant(sc.model, sc.training, v, *impl);
  engine::RunOptions ro;
  ro.record_path = out;
  ro.scenario_name = sc.name;
  ro.scenario_text = string_attr(attrs, "scenario_text", path);
  engine::run_variant(plan, *impl, sc.data, ro);
}

/// "# the re-run of A reproduces A.h5's digests at steps 0-3\n", or what differs; `ok` says
/// which.
std::string reproduction(const std::string& label, const std::string& original,
                         const std::string& rerun_path, int step, bool& ok) {
  const record::RecordReader a(original), b(rerun_path);
  compare::Selection sel;
  sel.groups = record::record_groups();
  std::vector<std::string> present;
  for (const auto& g : sel.groups) {
    bool any = false;
    for (int s : a.steps()) {
      for (const auto& h : a.groups(s)) any = any || h == g;
    }
    if (any) present.push_back(g);
  }
  sel.groups = present;
  for (int s = 0; s <= step; ++s) sel.steps.insert(s);
  const compare::CompareResult r =
      compare::compare_records(a, b, compare::CompareClass::parse("bitwise"), sel);
  ok = r.equal;
  if (r.equal) {
    return fmt::format("# the re-run of {} reproduces {} at steps 0-{} (every digest equal)\n",
                       label, original, step);
  }
  return fmt::format(
      "# WARNING: the re-run of {} does not reproduce {} ({}); the localisation "
      "below compares the re-runs, not the records\n",
      label, original, r.first_divergence ? r.first_divergence->describe() : "structure differs");
}

}  // namespace

Localized localize(const std::string& a, const std::string& b, const std::set<int>& steps,
                   const compare::CompareClass& cls, const compare::Selection& sel,
                   const std::string& dir) {
  MTP_INTERNAL_ASSERT(!steps.empty(), "localize without a step");
  Localized out;
  out.a_rerun = dir + "/A.localize.h5";
  out.b_rerun = dir + "/B.localize.h5";
  rerun(a, steps, out.a_rerun);
  rerun(b, steps, out.b_rerun);
  const int last = *steps.rbegin();
  bool ok_a = false, ok_b = false;
  out.notes =
      reproduction("A", a, out.a_rerun, last, ok_a) + reproduction("B", b, out.b_rerun, last, ok_b);
  out.reproduced = ok_a && ok_b;
  const record::RecordReader ra(out.a_rerun), rb(out.b_rerun);
  compare::Selection at_step = sel;
  at_step.steps = steps;
  out.result = compare::compare_records(ra, rb, cls, at_step);
  return out;
}

}  // namespace mtp::cli
