// line_chart: inline-SVG loss curves with axes and a legend (line_chart.h).

#include "harness/report/line_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "harness/report/markup.h"
#include "harness/report/svg.h"

namespace mtp::report {
namespace {

constexpr double kWidth = 615, kPlotHeight = 230, kTop = 34, kRight = 18, kAxisBelow = 44;
constexpr double kLegendRow = 20, kTickFont = 11;
constexpr int kLegendColumns = 2;
constexpr size_t kLegendChars = 34;      // label characters per legend column
constexpr size_t kMaxMarkedPoints = 60;  // more points than this: lines only

constexpr std::array<const char*, 10> kColours = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                  "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                                  "#9c755f", "#79706e"};
constexpr std::array<const char*, 6> kDashes = {"", "9 4", "3 3", "12 3 3 3", "6 6", "2 5"};

/// How series `i` is drawn.
struct Style {
  std::string colour, dash;
  double width = 2.0, marker = 4.0;
  int shape = 0;  // 0 circle, 1 square, 2 triangle, 3 diamond, 4 cross
};

Style style_of(size_t i) {
  Style s;
  s.colour = kColours[i % kColours.size()];
  s.dash = kDashes[i % kDashes.size()];
  s.width = std::max(1.5, 5.0 - 0.9 * static_cast<double>(i));
  s.marker = std::max(2.0, 5.5 - 0.7 * static_cast<double>(i));
  s.shape = static_cast<int>(i % 5);
  return s;
}

std::string stroke_attrs(const Style& s) {
  std::string a =
      fmt::format(R"(fill="none" stroke="{}" stroke-width="{}" stroke-linejoin="round")", s.colour,
                  svg::num(s.width));
  if (!s.dash.empty()) a += fmt::format(R"( stroke-dasharray="{}")", s.dash);
  return a;
}

/// The marker of style `s` centred on (x, y).
std::string marker(const Style& s, double x, double y) {
  const double r = s.marker;
  const std::string paint = fmt::format(R"(fill="{}" stroke="#fff" stroke-width="0.8")", s.colour);
  switch (s.shape) {
    case 0:
      return fmt::format(R"(<circle cx="{}" cy="{}" r="{}" {}/>)", svg::num(x), svg::num(y),
                         svg::num(r), paint);
    case 1:
      return svg::rect(x - r * 0.85, y - r * 0.85, r * 1.7, r * 1.7, paint);
    case 2:
      return fmt::format(R"(<path d="M{} {}L{} {}L{} {}Z" {}/>)", svg::num(x), svg::num(y - r),
                         svg::num(x + r), svg::num(y + r * 0.8), svg::num(x - r),
                         svg::num(y + r * 0.8), paint);
    case 3:
      return fmt::format(R"(<path d="M{} {}L{} {}L{} {}L{} {}Z" {}/>)", svg::num(x),
                         svg::num(y - r), svg::num(x + r), svg::num(y), svg::num(x),
                         svg::num(y + r), svg::num(x - r), svg::num(y), paint);
    default:
      return fmt::format(R"(<path d="M{} {}L{} {}M{} {}L{} {}" stroke="{}" stroke-width="2"/>)",
                         svg::num(x - r), svg::num(y - r), svg::num(x + r), svg::num(y + r),
                         svg::num(x - r), svg::num(y + r), svg::num(x + r), svg::num(y - r),
                         s.colour);
  }
}

/// "identical to <label>" for the first earlier series with exactly the same points, else "".
std::string identical_to(const std::vector<ChartSeries>& series, size_t i) {
  for (size_t j = 0; j < i; ++j) {
    if (!series[i].points.empty() && series[j].points == series[i].points) {
      return "= " + series[j].label;
    }
  }
  return "";
}

/// The legend below the plot: a line sample with its marker, then the label, per series.
std::string legend(const std::vector<ChartSeries>& series, double top) {
  std::string s;
  const double column = (kWidth - 24) / kLegendColumns;
  for (size_t i = 0; i < series.size(); ++i) {
    const Style st = style_of(i);
    const double x = 16 + column * static_cast<double>(i % kLegendColumns);
    const double y = top + kLegendRow * static_cast<double>(i / kLegendColumns) + kLegendRow / 2;
    s += svg::line(x, y, x + 34, y, stroke_attrs(st)) + marker(st, x + 17, y);
    const std::string same = identical_to(series, i);
    std::string label = markup::shorten(series[i].label, same.empty() ? kLegendChars : 18);
    if (!same.empty()) label += "  (" + markup::shorten(same, 18) + ")";
    if (series[i].points.empty()) label += "  (no values)";
    s += fmt::format(R"(<g class="legend-entry">{}{}</g>)",
                     svg::text(x + 42, y + 4, label, R"(font-size="12")"),
                     svg::title(series[i].label + (same.empty() ? "" : " " + same)));
  }
  return s;
}

/// Where the data lands: the plot area and the axis ranges.
struct Frame {
  double left = 0, plot_w = 0, xmin = 0, xmax = 1;
  svg::Ticks yt, xt;
  std::vector<std::string> y_labels;  ///< one per yt.values
  double px(double x) const { return left + (x - xmin) / (xmax - xmin) * plot_w; }
  double py(double y) const { return kTop + (yt.hi - y) / (yt.hi - yt.lo) * kPlotHeight; }
};

/// Series with every y replaced by log10(y), and 0 by `zero_row` (one decade below the smallest
/// positive y, or -1 when none is positive); `zero_row` is returned through the pointer.
std::vector<ChartSeries> to_log10(const std::vector<ChartSeries>& series, double* zero_row) {
  double smallest = INFINITY;
  for (const ChartSeries& c : series) {
    for (const auto& p : c.points) {
      if (p.second > 0) smallest = std::min(smallest, p.second);
    }
  }
  *zero_row = std::isfinite(smallest) ? std::floor(std::log10(smallest)) - 1 : -1;
  std::vector<ChartSeries> out = series;
  for (ChartSeries& c : out) {
    for (auto& p : c.points) p.second = p.second > 0 ? std::log10(p.second) : *zero_row;
  }
  return out;
}

/// Decade ticks from `zero_row` (labelled "0") up to the largest log10 value.
svg::Ticks decade_ticks(double zero_row, double top) {
  svg::Ticks t;
  t.lo = zero_row;
  t.hi = std::max(std::ceil(top), zero_row + 1);
  t.step = std::max(1.0, std::ceil((t.hi - t.lo) / 8));  // at most about 8 labels
  for (double v = t.lo; v <= t.hi + 1e-9; v += t.step) t.values.push_back(v);
  if (t.values.back() < t.hi) t.values.push_back(t.hi = t.values.back() + t.step);
  return t;
}

Frame frame_of(const std::vector<ChartSeries>& series, const double* zero_row) {
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const ChartSeries& c : series) {
    for (const auto& [x, y] : c.points) {
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  }
  if (xmin > xmax) {  // no point at all
    xmin = ymin = 0;
    xmax = ymax = 1;
  }
  if (xmin == xmax) {
    xmin -= 1;
    xmax += 1;
  }
  Frame f;
  f.xmin = xmin;
  f.xmax = xmax;
  if (zero_row != nullptr) {
    f.yt = decade_ticks(*zero_row, ymax);
    for (double v : f.yt.values) {
      f.y_labels.push_back(v == *zero_row ? "0" : fmt::format("1e{}", std::lround(v)));
    }
  } else {
    f.yt = svg::nice_ticks(ymin, ymax, 6, false);
    for (double v : f.yt.values) f.y_labels.push_back(svg::tick_label(v, f.yt.decimals));
  }
  f.xt = svg::nice_ticks(xmin, xmax, 8, true);
  double widest = 30;
  for (const std::string& label : f.y_labels) {
    widest = std::max(widest, markup::text_width(label, kTickFont, false));
  }
  f.left = widest + 22;
  f.plot_w = kWidth - f.left - kRight;
  return f;
}

/// The plot area, horizontal grid lines with the y tick labels, x ticks and the x axis label.
std::string axes(const Frame& f, std::string_view x_label) {
  std::string s =
      svg::rect(f.left, kTop, f.plot_w, kPlotHeight, R"(fill="#fbfbfd" stroke="#c9ccd3")");
  const std::string tick_attrs = fmt::format(R"(font-size="{}" fill="#444")", kTickFont);
  for (size_t i = 0; i < f.yt.values.size(); ++i) {
    const double y = f.py(f.yt.values[i]);
    s += svg::line(f.left, y, f.left + f.plot_w, y, R"(stroke="#e3e5ea")");
    s += svg::text(f.left - 6, y + 4, f.y_labels[i], tick_attrs + R"( text-anchor="end")");
  }
  for (double v : f.xt.values) {
    if (v < f.xmin - 1e-9 || v > f.xmax + 1e-9) continue;
    const double x = f.px(v);
    s += svg::line(x, kTop + kPlotHeight, x, kTop + kPlotHeight + 5, R"(stroke="#888")");
    s += svg::text(x, kTop + kPlotHeight + 18, svg::tick_label(v, 0),
                   tick_attrs + R"( text-anchor="middle")");
  }
  return s + svg::text(f.left + f.plot_w / 2, kTop + kPlotHeight + 36, x_label,
                       R"(font-size="12" fill="#444" text-anchor="middle")");
}

/// Series `i`'s polyline and markers ("" for a series without points).
std::string curve(const Frame& f, const ChartSeries& c, size_t i) {
  if (c.points.empty()) return "";
  const Style st = style_of(i);
  std::string points;
  for (const auto& [x, y] : c.points) {
    points += (points.empty() ? "" : " ") + svg::num(f.px(x)) + "," + svg::num(f.py(y));
  }
  std::string s = fmt::format(R"(<polyline class="series" data-series="{}" points="{}" {}/>)",
                              markup::escape(c.label), points, stroke_attrs(st)) +
                  "\n";
  if (c.points.size() > kMaxMarkedPoints) return s;
  s += "<g>";
  for (const auto& [x, y] : c.points) s += marker(st, f.px(x), f.py(y));
  return s + "</g>\n";
}

}  // namespace

std::string line_chart(std::string_view title, std::string_view x_label,
                       const std::vector<ChartSeries>& input, YScale y_scale) {
  double zero_row = 0;
  const bool log = y_scale == YScale::kLog10;
  const std::vector<ChartSeries> series = log ? to_log10(input, &zero_row) : input;
  const Frame f = frame_of(series, log ? &zero_row : nullptr);
  const double legend_top = kTop + kPlotHeight + kAxisBelow;
  const size_t legend_rows = (series.size() + kLegendColumns - 1) / kLegendColumns;
  const double height = legend_top + kLegendRow * static_cast<double>(legend_rows) + 8;
  std::string s = svg::open(kWidth, height, title, "line-chart");
  s += svg::text(f.left, 20, title, R"(font-size="14" font-weight="600")");
  s += axes(f, x_label);
  for (size_t i = 0; i < series.size(); ++i) s += curve(f, series[i], i);
  return s + legend(series, legend_top) + svg::close();
}

}  // namespace mtp::report
