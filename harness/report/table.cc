// format_table: the terminal verdict of check (report.h).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "harness/report/report.h"

namespace mtp::report {
namespace {

std::string divergence_text(const PairResult& p) {
  const compare::CompareResult& r = p.result;
  if (!r.structural.empty()) return "structure: " + r.structural.front();
  if (!r.first_divergence) return "-";
  std::string s = r.first_divergence->describe();
  const auto it = p.owners.find(r.first_divergence->name);
  if (it != p.owners.end() && it->second.stage >= 0) s += " [" + it->second.describe() + "]";
  return s;
}

}  // namespace

std::string format_table(const std::vector<ExpectationResult>& results) {
  size_t wn = 11, wc = 5, wp = 24;
  for (const auto& r : results) {
    wn = std::max(wn, r.expectation->name.size());
    wc = std::max(wc, r.expectation->cls.to_string().size());
    for (const auto& p : r.pairs) wp = std::max(wp, p.baseline.size() + p.other.size() + 4);
  }
  std::string s = fmt::format("# {:<{}} {:<{}} {:<6} {:<{}} {}\n", "expectation", wn, "class", wc,
                              "result", "pair (baseline vs other)", wp, "first divergence");
  for (const auto& r : results) {
    if (r.skipped) {
      s += fmt::format("  {:<{}} {:<{}} {:<6} {:<{}} not evaluated: variant(s) {} not run\n",
                       r.expectation->name, wn, r.expectation->cls.to_string(), wc, "SKIP",
                       fmt::format("{}", fmt::join(r.expectation->variants, ", ")), wp,
                       fmt::join(r.missing, ", "));
      continue;
    }
    for (size_t i = 0; i < r.pairs.size(); ++i) {
      const auto& p = r.pairs[i];
      const std::string name = i == 0 ? r.expectation->name : "";
      const std::string cls = i == 0 ? r.expectation->cls.to_string() : "";
      std::string div = divergence_text(p);
      if (!p.note.empty()) div += "  [" + p.note + "]";
      s += fmt::format("  {:<{}} {:<{}} {:<6} {:<{}} {}\n", name, wn, cls, wc,
                       p.holds ? "PASS" : "FAIL", p.baseline + " vs " + p.other, wp, div);
    }
  }
  return s;
}

}  // namespace mtp::report
