// File: harness/report/heatmap.h
//
// The HTML report's picture of one failing pair (heatmap.cc): an inline-SVG heatmap of tensors ×
// steps coloured by each tensor's max ULP distance at that step on a log scale (bitwise equal:
// white; bits differ by 0 ULP, i.e. +0 vs −0: very light; 1 ULP … ≥ 1e9 ULP: light to dark red;
// NaN vs number: black; digest-only difference: hatched purple; structural difference: blue;
// tensor absent at that step: grey), the first divergence outlined and labelled, the owning
// pipeline stage beside the rows (named where it changes, a line across the rows there), and a
// legend. Only tensors that differ (in bits, structure or digests) at some step get a row.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "harness/compare/compare.h"
#include "harness/report/report.h"

namespace mtp::report {

/// What one heatmap cell (a tensor at a step) shows; kNotCompared: the tensor has no comparison
/// at that step (absent from it).
enum class CellKind { kNotCompared, kEqual, kZeroUlp, kUlp, kNan, kDigest, kStructural };

/// The kind of the cell of `d` (structure first, then digests, then values).
CellKind cell_kind(const compare::TensorDiff& d);

/// The fill of a kUlp cell: `ulp` ≥ 1 on a log scale from light red (1) to dark red (≥ 1e9).
std::string ulp_colour(uint64_t ulp);

/// Caps on the heatmap's size.
struct HeatmapLimits {
  int max_rows = 200;         ///< tensors shown at most (the first divergence's always among them)
  int64_t max_cells = 30000;  ///< rows × steps at most (lowers max_rows for long runs)
};

/// HTML for pair `p`: a line saying which tensors are shown (and how many were left out), the
/// <svg class="heatmap"> with one <rect class="cell"> per (tensor, step) and the first divergence
/// marked by a <rect class="first-divergence">, then the colour legend. `id` (an HTML id,
/// [A-Za-z0-9-]) keeps the SVG's pattern ids unique in the page. "" when no tensor differs.
std::string heatmap(const PairResult& p, std::string_view id, const HeatmapLimits& limits = {});

}  // namespace mtp::report
