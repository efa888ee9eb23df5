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

/// The chart as one <svg class="line-chart"> element; each series' curve is a
/// <polyline class="series"> with one point per element of `points` (a series without points
/// gets none, and its legend entry says "(no values)"; a single point shows as its marker).
/// `title` heads the chart, `x_label` names the x axis.
std::string line_chart(std::string_view title, std::string_view x_label,
                       const std::vector<ChartSeries>& series);

}  // namespace mtp::report
