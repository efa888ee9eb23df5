#include "harness/sim/timeline_svg.h"

#include <fmt/format.h>

#include <pugixml.hpp>
#include <sstream>

namespace mtp::sim {
namespace {

/// Forward colour, backward colour of a stage (see the header).
std::pair<const char*, const char*> colours(const StageCost& s) {
  if (s.has_mtp) return {"#f9b26c", "#d9640b"};
  if (s.has_loss) return {"#8fd18a", "#3d8b37"};
  if (s.has_embedding) return {"#7fd1c8", "#2a8f85"};
  return {"#8fb5dc", "#3465a4"};
}

}  // namespace

std::string timeline_svg(const SimResult& r, const std::vector<StageCost>& stages,
                         const std::string& title) {
  constexpr double kLeft = 70, kTop = 28, kRow = 26, kWidth = 1100, kAxis = 24, kRight = 60;
  const int P = static_cast<int>(r.ranks.size());
  const double scale = r.step_ms > 0.0 ? kWidth / r.step_ms : 1.0;
  const double height = kTop + P * kRow + kAxis + 8;
  pugi::xml_document doc;
  pugi::xml_node svg = doc.append_child("svg");
  svg.append_attribute("xmlns") = "http://www.w3.org/2000/svg";
  svg.append_attribute("width") = kLeft + kWidth + kRight;
  svg.append_attribute("height") = height;
  svg.append_attribute("font-family") = "sans-serif";
  svg.append_attribute("font-size") = 11;
  pugi::xml_node t = svg.append_child("text");
  t.append_attribute("x") = 4;
  t.append_attribute("y") = 16;
  t.append_attribute("font-size") = 13;
  t.text().set(title.c_str());
  for (int p = 0; p < P; ++p) {
    pugi::xml_node label = svg.append_child("text");
    label.append_attribute("x") = 4;
    label.append_attribute("y") = kTop + p * kRow + kRow * 0.65;
    label.text().set(fmt::format("rank {}", p).c_str());
  }
  for (const SimOp& o : r.ops) {
    const StageCost& sc = stages[o.stage];
    const auto [fwd, bwd] = colours(sc);
    const double dur = o.type == schedule::OpType::kForward ? sc.forward_ms : sc.backward_ms;
    // A combined block draws its forward first, then its backward, inside the block.
    double x0 = o.start_ms;
    if (o.combined && o.type == schedule::OpType::kBackward) x0 = o.end_ms - dur;
    pugi::xml_node rect = svg.append_child("rect");
    rect.append_attribute("x") = kLeft + x0 * scale;
    rect.append_attribute("y") = kTop + o.pipeline_rank * kRow + 2;
    rect.append_attribute("width") = std::max(dur * scale, 0.5);
    rect.append_attribute("height") = kRow - 4;
    rect.append_attribute("fill") = o.type == schedule::OpType::kForward ? fwd : bwd;
    rect.append_attribute("stroke") = "#ffffff";
    rect.append_attribute("stroke-width") = 0.5;
    pugi::xml_node tip = rect.append_child("title");
    tip.text().set(fmt::format("{} stage {} ({}) microbatch {}: {:.3f}-{:.3f} ms",
                               o.type == schedule::OpType::kForward ? "F" : "B", o.stage,
                               sc.contents, o.microbatch, x0, x0 + dur)
                       .c_str());
    if (dur * scale >= 14) {
      pugi::xml_node txt = svg.append_child("text");
      txt.append_attribute("x") = kLeft + (x0 + dur / 2) * scale;
      txt.append_attribute("y") = kTop + o.pipeline_rank * kRow + kRow * 0.65;
      txt.append_attribute("text-anchor") = "middle";
      txt.append_attribute("font-size") = 9;
      txt.text().set(std::to_string(o.microbatch).c_str());
    }
  }
  const double y_axis = kTop + P * kRow + 4;
  pugi::xml_node axis = svg.append_child("line");
  axis.append_attribute("x1") = kLeft;
  axis.append_attribute("x2") = kLeft + kWidth;
  axis.append_attribute("y1") = y_axis;
  axis.append_attribute("y2") = y_axis;
  axis.append_attribute("stroke") = "#444444";
  for (int k = 0; k <= 10; ++k) {
    const double ms = r.step_ms * k / 10.0;
    pugi::xml_node tick = svg.append_child("text");
    tick.append_attribute("x") = kLeft + ms * scale;
    tick.append_attribute("y") = y_axis + 14;
    tick.append_attribute("text-anchor") = "middle";
    tick.text().set(fmt::format("{:.1f} ms", ms).c_str());
  }
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_default | pugi::format_no_declaration);
  return out.str();
}

}  // namespace mtp::sim
