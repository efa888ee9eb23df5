// File: harness/report/svg.h
//
// SVG primitives for the HTML report's inline charts (line_chart.h, heatmap.h): elements written
// as strings, compact coordinates, and "nice" axis ticks (1, 2 or 5 × 10^k apart). Inline SVG in
// HTML5 needs no namespace declaration, so the page references no external URL.
// Example:
//   std::string s = svg::open(200, 100, "loss") + svg::rect(0, 0, 10, 10, R"(fill="#fff")") +
//                   svg::close();
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mtp::report::svg {

/// `v` with at most two decimals and no trailing zeros: "12.5", "3", "-0.25".
std::string num(double v);

/// `<svg width=.. height=.. viewBox=..>` with role="img", an aria-label and a <title> (both
/// `label`, escaped); `css_class` (may be empty) names the chart kind for styling and tests.
std::string open(double width, double height, std::string_view label,
                 std::string_view css_class = "");
/// "</svg>\n".
std::string close();

/// `<rect>`; `attrs` are further attributes, written as they are (escape user text in them).
/// `inner` (e.g. a title()) goes inside the element.
std::string rect(double x, double y, double w, double h, std::string_view attrs,
                 std::string_view inner = "");
/// `<line>` from (x1, y1) to (x2, y2).
std::string line(double x1, double y1, double x2, double y2, std::string_view attrs);
/// `<text>` at (x, y) holding `content` (escaped here).
std::string text(double x, double y, std::string_view content, std::string_view attrs);
/// `<title>` holding `content` (escaped here): the element's tooltip.
std::string title(std::string_view content);

/// Axis ticks: `values` ascending from `lo` to `hi` (inclusive) `step` apart; `decimals`: the
/// digits after the point that tell them apart.
struct Ticks {
  double lo = 0.0, hi = 1.0, step = 1.0;
  std::vector<double> values;
  int decimals = 0;
};

/// About `target` ticks 1, 2 or 5 × 10^k apart whose range covers [lo, hi]. `integer`: step ≥ 1
/// (step numbers). An empty range (lo == hi) is widened around the value first.
Ticks nice_ticks(double lo, double hi, int target, bool integer);

/// `v` with `decimals` digits after the point ("-0" written as "0").
std::string tick_label(double v, int decimals);

}  // namespace mtp::report::svg
