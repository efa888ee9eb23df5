// format_table: the terminal verdict of check (report.h).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "harness/report/report.h"

namespace mtp::report {
namespace {}  // namespace

std::string format_table(const std::vector<ExpectationResult>& results) {
  size_t wn = 11, wc = 5, wp = 24;
  for (const auto& r : results) {
    wn = std::max(wn, r.expectation->name.size());
    wc = std::max(wc, r.expectation->class_text().size());
    for (const auto& p : r.pairs) wp = std::max(wp, p.baseline.size() + p.other.size() + 4);
  }
  std::string s = fmt::format("# {:<{}} {:<{}} {:<6} {:<{}} {}\n", "expectation", wn, "class", wc,
                              "result", "pair (baseline vs other)", wp, "what was measured");
  for (const auto& r : results) {
    if (r.skipped && !r.undecided) {
      s += fmt::format("  {:<{}} {:<{}} {:<6} {:<{}} {}\n", r.expectation->name, wn,
                       r.expectation->class_text(), wc, "SKIP",
                       fmt::format("{}", fmt::join(r.expectation->variants, ", ")), wp,
                       r.skip_reason());
      continue;
    }
    for (size_t i = 0; i < r.pairs.size(); ++i) {
      const auto& p = r.pairs[i];
      const std::string name = i == 0 ? r.expectation->name : "";
      const std::string cls = i == 0 ? r.expectation->class_text() : "";
      // A detector (scenarios/faults.toml) holds when its comparison fails because of the fault.
      const bool detector = r.expectation->detects.has_value();
      s += fmt::format("  {:<{}} {:<{}} {:<6} {:<{}} {}\n", name, wn, cls, wc,
                       p.undecided ? "SKIP"
                       : detector  ? (p.holds ? "CAUGHT" : "MISSED")
                       : p.holds   ? "PASS"
                                   : "FAIL",
                       p.baseline + " vs " + p.other, wp, pair_verdict(p));
    }
  }
  return s;
}

}  // namespace mtp::report
