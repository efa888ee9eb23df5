// File: harness/report/line_chart.h
//
// An inline-SVG line chart for the HTML report's loss curves: one polyline per series (x
// ascending), axes with tick labels and grid lines, and a legend. Series that coincide stay
// visible: each has its own colour, dash pattern, marker shape and a stroke that narrows with
// the series' index, so a later curve drawn over an earlier one leaves the earlier one's edges
// showing; the legend also names the earlier series a curve is identical to.
// Example:
//   std::string s = line_chart("total loss", "step", {{"base", {{1, 2.5}, {2, 2.4}}}});
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mtp::report {

/// One curve: its legend label and its (x, y) points, x ascending, every value finite.
struct ChartSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;
};

/// How y values map to the plot: linearly, or by log10 with exact zeros on a row of their own
/// below the lowest decade (labelled "0"), for differences that are often exactly zero.
enum class YScale { kLinear, kLog10 };

/// The chart as one <svg class="line-chart"> element; each series' curve is a
/// <polyline class="series"> with one point per element of `points` (a series without points
/// gets none, and its legend entry says "(no values)"; a single point shows as its marker).
/// `title` heads the chart, `x_label` names the x axis. With YScale::kLog10 every y must be ≥ 0;
/// the y ticks are the decades (1e-7, 1e-6, …) and "0".
std::string line_chart(std::string_view title, std::string_view x_label,
                       const std::vector<ChartSeries>& series, YScale y_scale = YScale::kLinear);

}  // namespace mtp::report
