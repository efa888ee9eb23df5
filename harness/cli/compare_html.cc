#include "harness/cli/compare_html.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <variant>
#include <vector>

#include "harness/record/record.h"
#include "harness/report/report.h"
#include "harness/scenario/scenario.h"

namespace mtp::cli {
namespace {

namespace fs = std::filesystem;

std::string string_attr(const record::AttrMap& m, const std::string& key,
                        const std::string& absent) {
  const auto it = m.find(key);
  if (it == m.end()) return absent;
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return std::to_string(*i);
  return fmt::format("{}", std::get<double>(it->second));
}

int int_attr(const record::AttrMap& m, const std::string& key, int absent) {
  const auto it = m.find(key);
  if (it == m.end()) return absent;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<int>(*i);
  return absent;
}

/// The report's facts about the run that wrote record `path`, labelled `label`.
report::VariantRun run_of(const record::RecordReader& rec, const std::string& path,
                          const std::string& label) {
  const record::AttrMap m = rec.attrs();
  report::VariantRun run;
  run.name = label;
  run.implementation = string_attr(m, "implementation", "(not recorded)");
  run.layout = string_attr(m, "layout", "(not recorded)");
  run.schedule = string_attr(m, "schedule", "(not recorded)");
  run.record_path = path;
  run.pipeline_size = int_attr(m, "P", 1);
  run.virtual_size = int_attr(m, "V", 1);
  run.data_parallel_size = int_attr(m, "data_parallel_size", 1);
  run.optimizer = string_attr(m, "optimizer", "(not recorded)");
  run.mtp_standalone = int_attr(m, "mtp_standalone", 0) != 0;
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  run.record_bytes = ec ? 0 : static_cast<int64_t>(bytes);
  run.record_mode = "as recorded";
  run.losses = report::read_losses(rec);
  run.final_total_loss = run.losses.empty() ? 0.0 : run.losses.back().total;
  return run;
}

}  // namespace

std::string compare_html(const std::string& a, const std::string& b,
                         const compare::CompareClass& cls, const compare::Selection& sel,
                         const compare::CompareResult& r, const CompareVerdict& v) {
  const record::RecordReader ra(a), rb(b);
  auto label = [](const record::RecordReader& rec, const std::string& path) {
    const std::string variant = string_attr(rec.attrs(), "variant", "");
    return variant.empty() ? fs::path(path).filename().string() : variant;
  };
  std::string la = label(ra, a), lb = label(rb, b);
  if (la == lb) {
    la = "A: " + la;
    lb = "B: " + lb;
  }
  scenario::Scenario sc;
  sc.name = "compare";
  sc.description = fmt::format("record A {} vs record B {} under {}", a, b, cls.to_string());
  sc.source = fmt::format("(none: mtp-harness compare {} {})", a, b);
  scenario::Expectation e;
  e.name = "compare";
  e.variants = {la, lb};
  e.cls = cls;
  e.selection = sel;
  e.why = "mtp-harness compare";
  report::PairResult p;
  p.baseline = la;
  p.other = lb;
  p.result = r;
  p.holds = v.holds;
  p.undecided = v.undecided;
  p.nonfinite = v.nonfinite;
  for (const auto& t : r.tensors) {
    if ((t.failed() || t.bit_mismatches > 0) && !p.owners.count(t.name)) {
      p.owners[t.name] = report::owner_of(ra, t.name);
    }
  }
  report::ExpectationResult er;
  er.expectation = &e;
  er.holds = v.holds;
  er.undecided = v.undecided;
  er.pairs.push_back(std::move(p));
  return report::to_html(sc, {run_of(ra, a, la), run_of(rb, b, lb)}, {er});
}

}  // namespace mtp::cli
