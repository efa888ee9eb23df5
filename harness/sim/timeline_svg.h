// File: harness/sim/timeline_svg.h
//
// The simulated step as an SVG timeline: one row per pipeline rank, one block per op at its start
// and duration, forwards light and backwards dark, coloured by what the stage holds (decoder
// layers blue, the embedding stage teal, an MTP stage orange, the loss stage green; a stage with
// both MTP and the loss orange), the microbatch written in blocks wide enough, a time axis in ms.
// Written with pugixml. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "harness/sim/simulate.h"

namespace mtp::sim {

/// The <svg> element (no XML declaration), `title` above the rows; embeddable in HTML. Throws
/// nothing.
std::string timeline_svg(const SimResult& r, const std::vector<StageCost>& stages,
                         const std::string& title);

}  // namespace mtp::sim
