// to_html: the self-contained HTML report (report.h): inline CSS and SVG, no script, no external
// resource. Sections: header with the verdict, variants, |Δ loss| per expectation pair (log
// scale), loss curves, the expectation matrix,
// one panel per failing pair (heatmap.h). Every user-controlled string goes through
// markup::escape.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/report/heatmap.h"
#include "harness/report/line_chart.h"
#include "harness/report/markup.h"
#include "harness/report/report.h"

namespace mtp::report {
namespace {

using markup::escape;

constexpr const char* kCss = R"css(
*{box-sizing:border-box}
body{margin:0;background:#f3f4f7;color:#1f2328;
  font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1360px;margin:0 auto;padding:20px 24px}
section{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:16px 20px;
  margin:0 0 18px}
h1{font-size:24px;margin:0 0 6px}h2{font-size:18px;margin:0 0 12px}
h3{font-size:16px;margin:0 0 8px}h4{font-size:14px;margin:14px 0 6px}
p{margin:4px 0 8px}code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f6f8fa;border:1px solid #e1e4e8;border-radius:6px;padding:8px 10px;margin:4px 0;
  white-space:pre-wrap;word-break:break-all;font-size:12px}
table{border-collapse:collapse;width:100%}
th,td{padding:6px 8px;border-bottom:1px solid #e6e8eb;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-size:13px;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.why{color:#444;font-size:13px;max-width:460px}
.meta{color:#57606a}.counts{font-size:15px;margin-top:8px}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:700;color:#fff;
  font-size:13px;vertical-align:middle}
.verdict{font-size:18px;padding:4px 16px}
.pass{background:#1f883d}.fail{background:#cf222e}.skip{background:#8c959f}
.pair{display:inline-block;margin:2px 6px 2px 0;padding:3px 9px;border-radius:5px;color:#fff;
  font-size:13px;text-decoration:none;white-space:nowrap}
.pair b{margin-left:6px}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:14px}
figure{margin:0;border:1px solid #eceef1;border-radius:6px;padding:6px}
svg.line-chart{display:block;width:100%;height:auto}
figcaption{font-size:12px;color:#57606a;margin:0 8px 4px}
.scroll{overflow-x:auto}
.heatmap-note{font-size:13px;color:#444}
.heatmap-legend{display:flex;flex-wrap:wrap;gap:6px 20px;font-size:12px;margin:10px 0 4px}
.heatmap-legend .entry{display:inline-flex;align-items:center;gap:6px}
.swatch{display:inline-block;width:14px;height:14px;border:1px solid #9aa0a6}
.swatch.marker{border:3px solid #000;background:#fff}
.ramp{display:inline-block;width:150px;height:14px;border:1px solid #9aa0a6}
.divergence{border-left:4px solid #cf222e;padding:2px 0 2px 14px;margin-top:12px}
.note{color:#9a3412}
.measured{font-size:12px;color:#57606a;margin:0 0 4px}.c-pass{color:#1f883d}.c-fail{color:#cf222e}.c-skip{color:#6e7781}
)css";

/// "PASS", "FAIL" or "SKIP" with the matching CSS class.
struct Verdict {
  const char* word;
  const char* css;
};
Verdict verdict_of(bool skipped, bool holds) {
  if (skipped) return {"SKIP", "skip"};
  return holds ? Verdict{"PASS", "pass"} : Verdict{"FAIL", "fail"};
}

std::string pair_id(size_t expectation, size_t pair) {
  return fmt::format("pair-{}-{}", expectation, pair);
}

const VariantRun* find_run(const std::vector<VariantRun>& runs, const std::string& name) {
  for (const VariantRun& v : runs) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

/// StageOwner::describe() of tensor `name` in `p`, "" when unknown.
std::string owner_of_tensor(const PairResult& p, const std::string& name) {
  const auto it = p.owners.find(name);
  return it == p.owners.end() ? "" : it->second.describe();
}

std::string header(const scenario::Scenario& sc, const std::vector<ExpectationResult>& results) {
  int passed = 0, failed = 0, skipped_count = 0, pairs = 0, failing_pairs = 0;
  for (const ExpectationResult& r : results) {
    if (r.skipped) {
      ++skipped_count;
      continue;
    }
    (r.holds ? passed : failed) += 1;
    for (const PairResult& p : r.pairs) {
      ++pairs;
      failing_pairs += p.holds ? 0 : 1;
    }
  }
  const Verdict v = failed > 0    ? Verdict{"FAIL", "fail"}
                    : passed == 0 ? Verdict{"NOTHING EVALUATED", "skip"}
                                  : Verdict{"PASS", "pass"};
  std::string s = "<section class=\"header\">\n";
  s += fmt::format("<h1>{} <span class=\"badge verdict {}\">{}</span></h1>\n", escape(sc.name),
                   v.css, v.word);
  if (!sc.description.empty()) s += fmt::format("<p>{}</p>\n", escape(sc.description));
  s += fmt::format("<p class=\"meta\">scenario file <code>{}</code></p>\n", escape(sc.source));
  s += fmt::format(
      "<p class=\"counts\"><b>{}</b> expectations: <b class=\"c-pass\">{} passed</b>, "
      "<b class=\"c-fail\">{} failed</b>, <b class=\"c-skip\">{} skipped</b> &middot; {} pairs "
      "compared, {} failing</p>\n",
      results.size(), passed, failed, skipped_count, pairs, failing_pairs);
  return s + "</section>\n";
}

std::string variants_table(const std::vector<VariantRun>& runs) {
  std::string s =
      "<section class=\"variants\">\n<h2>Variants</h2>\n<div class=\"scroll\"><table>\n"
      "<tr><th>variant</th><th>implementation</th><th>layout</th><th>P</th><th>V</th>"
      "<th>DP</th><th>schedule</th><th>record mode</th><th>wall time</th>"
      "<th>final loss</th></tr>\n";
  for (const VariantRun& v : runs) {
    s += fmt::format(
        "<tr><td title=\"{}\"><b>{}</b></td><td>{}</td><td><code>{}</code></td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td>"
        "<td>{}</td><td class=\"num\">{:.2f} s</td><td class=\"num\">{:.9g}</td></tr>\n",
        escape("record: " + v.record_path), escape(v.name), escape(v.implementation),
        escape(v.layout.empty() ? "(even split)" : v.layout), v.pipeline_size, v.virtual_size,
        v.context_parallel_size > 1 || v.expert_parallel_size > 1
            ? fmt::format(
                  "{} ({})", v.data_parallel_size,
                  v.context_parallel_size > 1 && v.expert_parallel_size > 1
                      ? fmt::format("CP {}, EP {}", v.context_parallel_size, v.expert_parallel_size)
                  : v.context_parallel_size > 1 ? fmt::format("CP {}", v.context_parallel_size)
                                                : fmt::format("EP {}", v.expert_parallel_size))
            : std::to_string(v.data_parallel_size),
        escape(v.schedule.empty() ? "-" : v.schedule), escape(v.record_mode), v.wall_seconds,
        v.final_total_loss);
  }
  return s + "</table></div>\n</section>\n";
}

/// The loss of series `kind` at `l`: 0 = total, 1 = lm, k ≥ 2 = mtp_(k-1); nullopt if absent.
std::optional<double> loss_of(const StepLoss& l, size_t kind) {
  if (kind == 0) return l.total;
  if (kind == 1) return l.lm;
  if (kind - 2 < l.mtp.size()) return l.mtp[kind - 2];
  return std::nullopt;
}

std::string kind_name(size_t kind) {
  if (kind == 0) return "total loss";
  if (kind == 1) return "LM loss";
  return fmt::format("MTP loss, depth {} (mtp_{})", kind - 1, kind - 1);
}

std::string loss_section(const std::vector<VariantRun>& runs) {
  size_t depth = 0;
  bool any = false;
  for (const VariantRun& v : runs) {
    any = any || !v.losses.empty();
    for (const StepLoss& l : v.losses) depth = std::max(depth, l.mtp.size());
  }
  std::string s = "<section class=\"losses\">\n<h2>Loss curves</h2>\n";
  if (!any) return s + "<p>No losses recorded.</p>\n</section>\n";
  s += "<p class=\"meta\">One curve per variant. Curves that coincide are drawn on top of each "
       "other with narrowing strokes, distinct dashes and markers; the legend names the variant "
       "a curve is identical to.</p>\n<div class=\"charts\">\n";
  for (size_t kind = 0; kind < depth + 2; ++kind) {
    std::vector<ChartSeries> series;
    int non_finite = 0;
    for (const VariantRun& v : runs) {
      ChartSeries c{v.name, {}};
      for (const StepLoss& l : v.losses) {
        const std::optional<double> y = loss_of(l, kind);
        if (!y) continue;
        if (std::isfinite(*y)) {
          c.points.emplace_back(l.step, *y);
        } else {
          ++non_finite;
        }
      }
      series.push_back(std::move(c));
    }
    s += "<figure>" + line_chart(kind_name(kind), "step", series);
    if (non_finite > 0) {
      s += fmt::format("<figcaption>{} non-finite values not drawn.</figcaption>", non_finite);
    }
    s += "</figure>\n";
  }
  return s + "</div>\n</section>\n";
}

/// One chart per expectation with pairs: each pair's |total loss(baseline) − total loss(other)|
/// per step, on a log scale whose bottom row is exactly 0 (the same recorded value), so a pair
/// that is bitwise equal lies flat on "0" and a drift shows its size and growth — which
/// overlapping loss curves of a few steps cannot show.
std::string loss_difference_section(const std::vector<VariantRun>& runs,
                                    const std::vector<ExpectationResult>& results) {
  std::map<std::string, const VariantRun*> by_name;
  for (const VariantRun& v : runs) by_name[v.name] = &v;
  std::string charts;
  std::vector<std::string> flat;  // expectations whose pairs never differ in total loss
  for (const ExpectationResult& r : results) {
    std::vector<ChartSeries> series;
    int non_finite = 0;
    bool any_difference = false;
    for (const PairResult& p : r.pairs) {
      const auto a = by_name.find(p.baseline), b = by_name.find(p.other);
      if (a == by_name.end() || b == by_name.end()) continue;
      std::map<int, double> other;
      for (const StepLoss& l : b->second->losses) other[l.step] = l.total;
      ChartSeries c{p.baseline + " vs " + p.other, {}};
      for (const StepLoss& l : a->second->losses) {
        const auto o = other.find(l.step);
        if (o == other.end()) continue;
        const double d = std::abs(l.total - o->second);
        if (std::isfinite(d)) {
          c.points.emplace_back(l.step, d);
          any_difference = any_difference || d > 0;
        } else {
          ++non_finite;
        }
      }
      series.push_back(std::move(c));
    }
    if (series.empty()) continue;
    if (!any_difference && non_finite == 0) {
      flat.push_back(r.expectation->name);
      continue;
    }
    charts += "<figure>" +
              line_chart(r.expectation->name + ": |Δ total loss|", "step", series, YScale::kLog10);
    if (non_finite > 0) {
      charts +=
          fmt::format("<figcaption>{} non-finite differences not drawn.</figcaption>", non_finite);
    }
    charts += "</figure>\n";
  }
  if (charts.empty() && flat.empty()) return "";
  std::string s =
      "<section class=\"loss-differences\">\n<h2>Loss differences</h2>\n<p class=\"meta\">Per "
      "expectation, each pair's |total loss of the baseline − total loss of the other| per step, "
      "log scale; the bottom row, 0, is the same recorded value (a bitwise-equal pair stays on "
      "it).</p>\n";
  if (!flat.empty()) {
    s += fmt::format("<p>No difference in total loss at any step, in any pair of: {}.</p>\n",
                     escape(fmt::format("{}", fmt::join(flat, ", "))));
  }
  if (!charts.empty()) s += "<div class=\"charts\">\n" + charts + "</div>\n";
  return s + "</section>\n";
}

std::string pair_tooltip(const ExpectationResult& r, const PairResult& p) {
  return fmt::format("{} vs {} ({}): {}", p.baseline, p.other, r.expectation->class_text(),
                     pair_verdict(p));
}

std::string matrix(const std::vector<ExpectationResult>& results) {
  std::string s =
      "<section class=\"matrix\">\n<h2>Expectations</h2>\n<div class=\"scroll\"><table>\n"
      "<tr><th>expectation</th><th>class</th><th>verdict</th>"
      "<th>pairs (baseline vs other)</th><th>why</th></tr>\n";
  for (size_t e = 0; e < results.size(); ++e) {
    const ExpectationResult& r = results[e];
    const scenario::Expectation& x = *r.expectation;
    const Verdict v = verdict_of(r.skipped, r.holds);
    std::string cells;
    const std::string not_run =
        escape(fmt::format("not evaluated: variant(s) not run: {}", fmt::join(r.missing, ", ")));
    for (size_t i = 1; r.skipped && !r.undecided && i < x.variants.size(); ++i) {
      cells += fmt::format("<span class=\"pair skip\" title=\"{}\">{}<b>SKIP</b></span>", not_run,
                           escape(x.variants[0] + " vs " + x.variants[i]));
    }
    for (size_t i = 0; i < r.pairs.size(); ++i) {
      const PairResult& p = r.pairs[i];
      const Verdict pv = verdict_of(false, p.holds);
      const std::string label = escape(p.baseline + " vs " + p.other);
      // A passing pair says what it measured beside its badge, not only in a tooltip.
      cells += p.holds ? fmt::format(
                             "<span class=\"pair pass\" title=\"{}\">{}<b>PASS</b></span>"
                             "<div class=\"measured\">{}</div>",
                             escape(pair_tooltip(r, p)), label, escape(pair_verdict(p)))
               : p.undecided
                   ? fmt::format(
                         "<span class=\"pair skip\" title=\"{}\">{}<b>SKIP</b></span>"
                         "<div class=\"measured\">{}</div>",
                         escape(pair_tooltip(r, p)), label, escape(pair_verdict(p)))
                   : fmt::format("<a class=\"pair {}\" href=\"#{}\" title=\"{}\">{}<b>{}</b></a>",
                                 pv.css, pair_id(e, i), escape(pair_tooltip(r, p)), label, pv.word);
    }
    s += fmt::format(
        "<tr title=\"{}\"><td><b>{}</b></td><td><code>{}</code></td>"
        "<td><span class=\"badge {}\">{}</span></td><td>{}</td>"
        "<td class=\"why\">{}</td></tr>\n",
        escape(x.class_text() + ": " + x.why), escape(x.name), escape(x.class_text()), v.css,
        v.word, cells, escape(x.why));
  }
  return s + "</table></div>\n</section>\n";
}

std::string retrain(const std::vector<VariantRun>& runs, const std::string& name) {
  const VariantRun* v = find_run(runs, name);
  const std::string cmd =
      v == nullptr || v->retrain_command.empty() ? "(not available)" : v->retrain_command;
  return fmt::format("<p>{}:</p><pre class=\"retrain\">{}</pre>\n", escape(name), escape(cmd));
}

std::string failing_pair(const ExpectationResult& r, const PairResult& p, const std::string& id,
                         const std::vector<VariantRun>& runs) {
  const compare::CompareResult& res = p.result;
  const scenario::Expectation& x = *r.expectation;
  std::string s = fmt::format("<section class=\"failing-pair\" id=\"{}\">\n", id);
  s += fmt::format(
      "<h3><span class=\"badge fail\">FAIL</span> {} &mdash; {} vs {} "
      "<code>{}</code></h3>\n",
      escape(x.name), escape(p.baseline), escape(p.other), escape(x.class_text()));
  if (!x.why.empty()) s += fmt::format("<p class=\"why\">{}</p>\n", escape(x.why));
  if (!p.note.empty()) s += fmt::format("<p class=\"note\">{}</p>\n", escape(p.note));
  int failing = 0, bits = 0;
  for (const compare::TensorDiff& d : res.tensors) {
    failing += d.failed() ? 1 : 0;
    bits += d.bit_mismatches > 0 ? 1 : 0;
  }
  s += fmt::format(
      "<p class=\"tally\">{} tensor comparisons: {} compared ({} of them by digests alone); {} "
      "outside the class, {} differ in bits.</p>\n",
      res.tensors.size(), res.tensors_compared, res.tensors_by_digest, failing, bits);
  if (!res.structural.empty()) {
    s += "<h4>Record structure</h4><ul>";
    for (const std::string& d : res.structural) s += "<li>" + escape(d) + "</li>";
    s += "</ul>\n";
  }
  const std::string map = heatmap(p, id);
  s += map.empty() ? "<p class=\"heatmap-note\">No tensor differs at any step.</p>\n" : map;
  s += "<div class=\"divergence\">\n<h4>First divergence</h4>\n";
  if (res.first_divergence) {
    const std::string owner = owner_of_tensor(p, res.first_divergence->name);
    s += fmt::format(
        "<pre class=\"first-divergence-text\">{}</pre>\n"
        "<p class=\"owner\">Owning stage: <b>{}</b></p>\n",
        escape(res.first_divergence->describe()),
        escape(owner.empty() ? "unknown (not a parameter, or the record names no stages)" : owner));
  } else {
    s += fmt::format("<p>{}</p>\n", escape(pair_verdict(p)));
  }
  s += "<h4>Re-train both variants</h4>\n" + retrain(runs, p.baseline) + retrain(runs, p.other);
  return s + "</div>\n</section>\n";
}

}  // namespace

std::string to_html(const scenario::Scenario& sc, const std::vector<VariantRun>& runs,
                    const std::vector<ExpectationResult>& results) {
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += fmt::format(
      "<title>{} &mdash; mtp-harness report</title>\n<style>{}</style>\n</head>\n"
      "<body>\n<main>\n",
      escape(sc.name), kCss);
  s += header(sc, results) + variants_table(runs) + loss_difference_section(runs, results) +
       loss_section(runs) + matrix(results);
  bool any_failing = false;
  for (size_t e = 0; e < results.size(); ++e) {
    for (size_t i = 0; i < results[e].pairs.size(); ++i) {
      const PairResult& p = results[e].pairs[i];
      if (p.holds || p.undecided) continue;
      if (!any_failing) s += "<h2>Failing pairs</h2>\n";
      any_failing = true;
      s += failing_pair(results[e], p, pair_id(e, i), runs);
    }
  }
  return s + "</main>\n</body>\n</html>\n";
}

}  // namespace mtp::report
