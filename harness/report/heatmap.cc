// heatmap: tensors × steps of a failing pair as inline SVG, with its legend (heatmap.h).

#include "harness/report/heatmap.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "harness/record/record.h"
#include "harness/report/markup.h"
#include "harness/report/svg.h"

namespace mtp::report {
namespace {

constexpr uint64_t kNanUlp = std::numeric_limits<uint64_t>::max();
constexpr double kMaxUlpDecades = 9.0;  // the darkest red: ≥ 1e9 ULP
constexpr size_t kLabelChars = 60;
constexpr double kTargetWidth = 1240, kMarkerLabelWidth = 190, kHeaderHeight = 34;
constexpr const char* kMonospace = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";

constexpr const char* kEqualFill = "#ffffff";
constexpr const char* kZeroUlpFill = "#fde4dc";
constexpr const char* kNanFill = "#000000";
constexpr const char* kStructuralFill = "#2c7fb8";
constexpr const char* kNotComparedFill = "#c4c7ce";
constexpr const char* kDigestFill = "#7b3fa0";
constexpr const char* kDigestStripe = "#d4b5e6";
constexpr const char* kMarkerColour = "#000000";

/// Light to dark red (ColorBrewer Reds), 1 ULP to ≥ 1e9 ULP.
constexpr std::array<std::array<int, 3>, 4> kUlpStops = {
    {{0xfc, 0xbb, 0xa1}, {0xfb, 0x6a, 0x4a}, {0xcb, 0x18, 0x1d}, {0x67, 0x00, 0x0d}}};

/// A heatmap row: one tensor ("group/name"), its cells by step.
struct Row {
  std::string group, name;
  std::map<int, const compare::TensorDiff*> cells;
  bool differs = false;
};

std::string row_label(const std::string& group, const std::string& name) {
  if (group.empty()) return "(whole step)";
  if (name.empty()) return group + " (whole group)";
  return group + "/" + name;
}

bool differs(const compare::TensorDiff& d) { return d.failed() || d.bit_mismatches > 0; }

bool same_tensor(const Row& r, const compare::TensorDiff& d) {
  return r.group == d.group && r.name == d.name;
}

/// The rows of `res`, by group in the order a step computes them (batch, loss, grad, weight,
/// model_weight, optimizer: record_groups()), within a group in the order their tensors first
/// appear in res.tensors — so that the first red row is the first divergence, not a step-0
/// weight listed first; the first divergence gets a row (first) when it names no compared tensor
/// (a missing step or group).
std::vector<Row> collect_rows(const compare::CompareResult& res) {
  std::vector<Row> rows;
  std::map<std::pair<std::string, std::string>, size_t> index;
  auto add = [&](const compare::TensorDiff& d) {
    const auto [it, inserted] = index.emplace(std::make_pair(d.group, d.name), rows.size());
    if (inserted) rows.push_back(Row{d.group, d.name, {}, false});
    Row& r = rows[it->second];
    r.cells[d.step] = &d;
    r.differs = r.differs || differs(d);
  };
  const auto& fd = res.first_divergence;
  const bool fd_listed =
      fd && std::any_of(res.tensors.begin(), res.tensors.end(), [&](const compare::TensorDiff& d) {
        return d.step == fd->step && d.group == fd->group && d.name == fd->name;
      });
  if (fd && !fd_listed) add(*fd);
  for (const compare::TensorDiff& d : res.tensors) add(d);
  const auto& groups = record::record_groups();
  auto rank = [&](const Row& r) {
    return std::find(groups.begin(), groups.end(), r.group) - groups.begin();
  };
  std::stable_sort(rows.begin() + (fd && !fd_listed ? 1 : 0), rows.end(),
                   [&](const Row& a, const Row& b) { return rank(a) < rank(b); });
  return rows;
}

std::string cell_fill(const compare::TensorDiff* d, std::string_view id) {
  if (d == nullptr) return kNotComparedFill;
  switch (cell_kind(*d)) {
    case CellKind::kNotCompared:
      return kNotComparedFill;
    case CellKind::kEqual:
      return kEqualFill;
    case CellKind::kZeroUlp:
      return kZeroUlpFill;
    case CellKind::kUlp:
      return ulp_colour(d->max_ulp);
    case CellKind::kNan:
      return kNanFill;
    case CellKind::kDigest:
      return fmt::format("url(#{}-digest)", id);
    case CellKind::kStructural:
      return kStructuralFill;
  }
  return kNotComparedFill;
}

/// The tooltip of a cell: what the comparison says about the tensor at that step.
std::string cell_tooltip(const compare::TensorDiff* d, int step, const std::string& label) {
  if (d == nullptr) {
    return fmt::format("step {} {}: not compared (absent at this step)", step, label);
  }
  if (!d->structural.empty() || d->first_block >= 0) return d->describe();
  const std::string ulp = d->max_ulp == kNanUlp ? "NaN vs number" : fmt::format("{}", d->max_ulp);
  return fmt::format(
      "{}\n{} of {} elements outside the class, {} differ in bits; max ULP {}, "
      "max |a - b| {:.3g}",
      d->describe(), d->mismatches, d->numel, d->bit_mismatches, ulp, d->max_abs);
}

/// The rows shown: the differing ones, at most `cap`, the first divergence's always included.
std::vector<const Row*> shown_rows(const std::vector<Row>& rows, size_t cap,
                                   const std::optional<compare::TensorDiff>& fd) {
  std::vector<const Row*> out;
  const Row* fd_row = nullptr;
  for (const Row& r : rows) {
    if (fd && same_tensor(r, *fd)) fd_row = &r;
    if (r.differs && out.size() < cap) out.push_back(&r);
  }
  if (fd_row != nullptr && std::find(out.begin(), out.end(), fd_row) == out.end()) {
    if (out.size() == cap && !out.empty()) out.pop_back();
    out.push_back(fd_row);
  }
  return out;
}

/// A legend entry: a swatch (CSS background) and its text.
std::string legend_entry(std::string_view background, std::string_view label) {
  return fmt::format(R"(<span class="entry"><span class="swatch" style="background:{}">)"
                     R"(</span>{}</span>)",
                     background, markup::escape(label));
}

std::string legend() {
  const std::string ramp =
      fmt::format("linear-gradient(to right, {}, {}, {}, {})", ulp_colour(1), ulp_colour(1000),
                  ulp_colour(1000000), ulp_colour(1000000000));
  const std::string hatch = fmt::format("repeating-linear-gradient(45deg, {0} 0 3px, {1} 3px 5px)",
                                        kDigestFill, kDigestStripe);
  std::string s = R"(<div class="heatmap-legend">)";
  s += legend_entry(kEqualFill, "bitwise equal");
  s += legend_entry(kZeroUlpFill, "bits differ, 0 ULP (+0 vs \u22120)");
  s += fmt::format(R"(<span class="entry">max ULP distance: 1<span class="ramp" )"
                   R"(style="background:{}"></span>≥ 10⁹ (log scale)</span>)",
                   ramp);
  s += legend_entry(kNanFill, "NaN vs number");
  s += legend_entry(hatch, "digest mismatch (values not recorded)");
  s += legend_entry(kStructuralFill, "structural difference");
  s += legend_entry(kNotComparedFill, "not compared");
  s += R"(<span class="entry"><span class="swatch marker"></span>first divergence</span>)";
  return s + "</div>\n";
}

/// "2 (rank 2, virtual 0)": the owning stage of tensor `name`, "" when unknown.
std::string owner_text(const PairResult& p, const std::string& name) {
  const auto it = p.owners.find(name);
  if (it == p.owners.end() || it->second.stage < 0) return "";
  const StageOwner& o = it->second;
  return fmt::format("{} (rank {}, virtual {})", o.stage, o.pipeline_rank, o.virtual_stage);
}

/// Sizes of the drawing in pixels: row labels, the grid of cells, the owner column, the marker's
/// label.
struct Layout {
  double row_h = 20, font = 12, label_w = 0, cell_w = 0, owner_w = 0;
  size_t rows = 0, columns = 0;
  double grid_w() const { return cell_w * static_cast<double>(columns); }
  double grid_h() const { return row_h * static_cast<double>(rows); }
  double x(size_t column) const { return label_w + cell_w * static_cast<double>(column); }
  double y(size_t row) const { return kHeaderHeight + row_h * static_cast<double>(row); }
  double owner_x() const { return label_w + grid_w() + 10; }
  double width() const { return label_w + grid_w() + owner_w + kMarkerLabelWidth; }
  double height() const { return kHeaderHeight + grid_h() + 10; }
  /// The baseline of text centred on row `row`.
  double text_y(size_t row) const { return y(row) + row_h / 2 + font * 0.36; }
};

Layout layout_of(const PairResult& p, const std::vector<const Row*>& shown, size_t columns) {
  Layout l;
  l.rows = shown.size();
  l.columns = columns;
  l.row_h = shown.size() <= 20 ? 20 : shown.size() <= 40 ? 16 : 10;
  l.font = l.row_h >= 20 ? 12 : l.row_h >= 16 ? 11 : 9;
  l.label_w = 80;
  for (const Row* r : shown) {
    const std::string label = markup::shorten(row_label(r->group, r->name), kLabelChars);
    l.label_w = std::max(l.label_w, markup::text_width(label, l.font, true));
    const std::string owner = owner_text(p, r->name);
    if (!owner.empty()) {
      l.owner_w = std::max({l.owner_w, markup::text_width("owning stage", 11, false) + 16,
                            markup::text_width(owner, l.font, true) + 16});
    }
  }
  l.label_w += 14;
  const double room = kTargetWidth - l.label_w - l.owner_w - kMarkerLabelWidth;
  l.cell_w = std::clamp(room / static_cast<double>(columns), 6.0, 64.0);
  return l;
}

/// "<p>N of M tensors shown …</p>": which rows the heatmap has and what it leaves out.
std::string shown_note(size_t shown, size_t rows, size_t differing, size_t cap) {
  std::string s = fmt::format(
      R"(<p class="heatmap-note">{} of {} tensors shown: those that differ at some step)", shown,
      rows);
  if (rows > differing) {
    s += fmt::format("; {} bitwise equal at every step omitted", rows - differing);
  }
  if (differing > shown) {
    s += fmt::format("; {} more differing tensors omitted (at most {} rows)", differing - shown,
                     cap);
  }
  return s + ".</p>\n";
}

/// The hatch of digest-only cells, id "<id>-digest".
std::string digest_pattern(std::string_view id) {
  return fmt::format(R"(<defs><pattern id="{}-digest" width="5" height="5" )"
                     R"x(patternUnits="userSpaceOnUse" patternTransform="rotate(45)">)x"
                     R"(<rect width="5" height="5" fill="{}"/>)"
                     R"(<rect width="2" height="5" fill="{}"/></pattern></defs>)",
                     id, kDigestFill, kDigestStripe) +
         "\n";
}

/// The step numbers over the columns, as many as fit (the first divergence's always, bold), and
/// the owner column's heading.
std::string column_headers(const Layout& l, const std::vector<int>& steps,
                           const std::optional<compare::TensorDiff>& fd) {
  const std::string normal = R"(font-size="11" fill="#555" text-anchor="middle")";
  std::string s =
      svg::text(l.label_w - 6, 14, "step", R"(font-size="11" fill="#555" text-anchor="end")");
  const double step_label_w = markup::text_width(std::to_string(steps.back()), 11, false) + 8;
  const size_t every = static_cast<size_t>(std::ceil(step_label_w / l.cell_w));
  for (size_t c = 0; c < steps.size(); ++c) {
    const bool is_fd = fd && fd->step == steps[c];
    if (c % every != 0 && !is_fd) continue;
    s += svg::text(l.x(c) + l.cell_w / 2, kHeaderHeight - 8, std::to_string(steps[c]),
                   is_fd ? R"(font-size="11" font-weight="700" text-anchor="middle")" : normal);
  }
  if (l.owner_w > 0) {
    s += svg::text(l.owner_x(), kHeaderHeight - 8, "owning stage", R"(font-size="11" fill="#555")");
  }
  return s + "\n";
}

/// Row `r` of the heatmap: its label (tooltip: full name and owner), one cell per step, and its
/// owner where that differs from `previous_owner` (the row above's; a line then separates them)
/// or the row holds the first divergence.
std::string row_svg(const PairResult& p, const Row& row, size_t r, const Layout& l,
                    const std::vector<int>& steps, std::string_view id, bool is_fd_row,
                    const std::string& previous_owner) {
  const std::string label = row_label(row.group, row.name);
  const std::string owner = owner_text(p, row.name);
  const bool owner_changes = r > 0 && owner != previous_owner;
  const std::string text_attrs =
      fmt::format(R"(font-size="{}" font-family="{}"{})", svg::num(l.font), kMonospace,
                  is_fd_row ? R"( font-weight="700")" : R"( fill="#333")");
  std::string s =
      fmt::format(R"(<g class="row-label">{}{}</g>)",
                  svg::text(l.label_w - 6, l.text_y(r), markup::shorten(label, kLabelChars),
                            text_attrs + R"( text-anchor="end")"),
                  svg::title(owner.empty() ? label : label + "\nowning stage " + owner));
  const double gap = l.cell_w >= 8 ? 1 : 0.5;
  for (size_t c = 0; c < steps.size(); ++c) {
    const auto it = row.cells.find(steps[c]);
    const compare::TensorDiff* d = it == row.cells.end() ? nullptr : it->second;
    s += svg::rect(l.x(c) + gap / 2, l.y(r) + gap / 2, l.cell_w - gap, l.row_h - gap,
                   fmt::format(R"(class="cell" fill="{}")", cell_fill(d, id)),
                   svg::title(cell_tooltip(d, steps[c], label)));
  }
  if (owner_changes) {
    s += svg::line(l.label_w - 4, l.y(r), l.owner_x() + l.owner_w - 8, l.y(r),
                   R"(class="owner-change" stroke="#5b6577" stroke-width="1")");
  }
  if (!owner.empty() && (r == 0 || owner_changes || is_fd_row)) {
    s += svg::text(l.owner_x(), l.text_y(r), owner, text_attrs);
  }
  return s + "\n";
}

/// The first divergence's outline (black, white inside: visible on every fill) and its label.
std::string marker_svg(const Layout& l, size_t row, size_t column, const compare::TensorDiff& fd) {
  const double x = l.x(column), y = l.y(row);
  std::string s = svg::rect(
      x - 1.5, y - 1.5, l.cell_w + 3, l.row_h + 3,
      fmt::format(R"(class="first-divergence" data-step="{}" data-tensor="{}" fill="none" )"
                  R"(stroke="{}" stroke-width="3")",
                  fd.step, markup::escape(row_label(fd.group, fd.name)), kMarkerColour));
  s += svg::rect(x + 0.5, y + 0.5, l.cell_w - 1, l.row_h - 1,
                 R"(fill="none" stroke="#fff" stroke-width="1")");
  s += svg::text(l.owner_x() + l.owner_w, y + l.row_h / 2 + 4,
                 fmt::format("\u25c0 first divergence (step {})", fd.step),
                 R"(class="first-divergence-label" font-size="12" font-weight="700")");
  return s + "\n";
}

}  // namespace

CellKind cell_kind(const compare::TensorDiff& d) {
  if (!d.structural.empty()) return CellKind::kStructural;
  if (d.first_block >= 0) return CellKind::kDigest;
  if (d.max_ulp == kNanUlp) return CellKind::kNan;
  if (d.max_ulp > 0) return CellKind::kUlp;
  return d.bit_mismatches > 0 || d.mismatches > 0 ? CellKind::kZeroUlp : CellKind::kEqual;
}

std::string ulp_colour(uint64_t ulp) {
  const double t = std::clamp(
      std::log10(static_cast<double>(std::max<uint64_t>(ulp, 1))) / kMaxUlpDecades, 0.0, 1.0);
  const double pos = t * static_cast<double>(kUlpStops.size() - 1);
  const size_t i = std::min(static_cast<size_t>(pos), kUlpStops.size() - 2);
  const double f = pos - static_cast<double>(i);
  int rgb[3];
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<int>(
        std::lround(kUlpStops[i][c] + f * (kUlpStops[i + 1][c] - kUlpStops[i][c])));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

std::string heatmap(const PairResult& p, std::string_view id, const HeatmapLimits& limits) {
  const compare::CompareResult& res = p.result;
  const std::vector<Row> rows = collect_rows(res);
  std::set<int> step_set;
  for (const Row& r : rows) {
    for (const auto& [step, d] : r.cells) step_set.insert(step);
  }
  const std::vector<int> steps(step_set.begin(), step_set.end());
  const size_t differing =
      std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.differs; });
  if (differing == 0) return "";
  const int64_t by_cells = limits.max_cells / static_cast<int64_t>(steps.size());
  const size_t cap =
      static_cast<size_t>(std::max<int64_t>(1, std::min<int64_t>(limits.max_rows, by_cells)));
  const std::vector<const Row*> shown = shown_rows(rows, cap, res.first_divergence);
  const Layout l = layout_of(p, shown, steps.size());
  const auto& fd = res.first_divergence;

  std::string s = shown_note(shown.size(), rows.size(), differing, cap);
  s += "<div class=\"scroll\">" +
       svg::open(l.width(), l.height(),
                 fmt::format("{} vs {}: tensors × steps", p.baseline, p.other), "heatmap");
  s += digest_pattern(id) + column_headers(l, steps, fd);
  s += svg::rect(l.label_w, kHeaderHeight, l.grid_w(), l.grid_h(), R"(fill="#e4e6ea")") + "\n";
  std::string marker, previous_owner;
  for (size_t r = 0; r < shown.size(); ++r) {
    const bool is_fd_row = fd && same_tensor(*shown[r], *fd);
    s += row_svg(p, *shown[r], r, l, steps, id, is_fd_row, previous_owner);
    previous_owner = owner_text(p, shown[r]->name);
    if (!is_fd_row) continue;
    const size_t column = std::lower_bound(steps.begin(), steps.end(), fd->step) - steps.begin();
    marker = marker_svg(l, r, column, *fd);
  }
  return s + marker + svg::close() + "</div>\n" + legend();
}

}  // namespace mtp::report
