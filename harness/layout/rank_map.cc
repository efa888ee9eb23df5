// File: harness/layout/rank_map.cc
//
// format_rank_map: the rank map of a PipelineLayout as a Markdown table (rows = pipeline ranks,
// columns = virtual stages), modelled on Megatron's pipeline_parallel_layout docs, followed by
// the derived facts.

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "harness/layout/internal.h"
#include "harness/layout/layout.h"

namespace mtp::layout {
namespace {

// "t0-2", "t5"; consecutive ids collapse to a range, gaps start a new one ("t0-1 t4").
std::string ranges(char prefix, const std::vector<int>& ids) {
  std::string out;
  for (size_t a = 0; a < ids.size();) {
    size_t b = a;
    while (b + 1 < ids.size() && ids[b + 1] == ids[b] + 1) ++b;
    if (!out.empty()) out += ' ';
    out += b == a ? fmt::format("{}{}", prefix, ids[a])
                  : fmt::format("{}{}-{}", prefix, ids[a], ids[b]);
    a = b + 1;
  }
  return out;
}

// "E t0-2", "t7 FLN m1-2", "L", "-" when empty.
std::string cell(const StagePlan& plan) {
  std::vector<std::string> parts;
  if (plan.has_embedding) parts.push_back("E");
  if (!plan.decoder_layers.empty()) parts.push_back(ranges('t', plan.decoder_layers));
  if (plan.owns_final_layernorm) parts.push_back("FLN");
  if (!plan.mtp_depths.empty()) parts.push_back(ranges('m', plan.mtp_depths));
  if (plan.has_loss) parts.push_back("L");
  if (parts.empty()) return "-";
  std::string out = parts[0];
  for (size_t k = 1; k < parts.size(); ++k) out += " " + parts[k];
  return out;
}

}  // namespace

std::string format_rank_map(const PipelineLayout& layout) {
  const int p_size = layout.pipeline_size;
  const int v_size = layout.virtual_size;
  // table[0] is the header row; column 0 holds the pipeline rank.
  std::vector<std::vector<std::string>> table;
  table.emplace_back(std::vector<std::string>{"pp \\ v"});
  for (int v = 0; v < v_size; ++v) table[0].push_back(std::to_string(v));
  for (int p = 0; p < p_size; ++p) {
    std::vector<std::string> row{std::to_string(p)};
    for (int v = 0; v < v_size; ++v) row.push_back(cell(layout.at(p, v)));
    table.push_back(std::move(row));
  }
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  const auto print_row = [&](const std::vector<std::string>& row) {
    std::string line = "|";
    for (size_t c = 0; c < row.size(); ++c) {
      line += fmt::format(" {:<{}} |", row[c], width[c]);
    }
    return line + "\n";
  };
  std::string out = internal::quote_layout(layout.text) + "\n";
  out += print_row(table[0]);
  out += "|";
  for (size_t w : width) out += std::string(w + 2, '-') + "|";
  out += "\n";
  for (size_t r = 1; r < table.size(); ++r) out += print_row(table[r]);
  out += fmt::format("P = {}, V = {}, N = {}, D = {}\n", p_size, v_size, layout.num_layers,
                     layout.mtp_num_layers);
  if (layout.mtp_stages.size() > 1) {
    std::vector<std::string> each;
    for (int s : layout.mtp_stages) {
      const auto& d = layout.stages[static_cast<size_t>(s)].mtp_depths;
      each.push_back(fmt::format("{} (p={}, v={}; depth{} {}{})", s, s % p_size, s / p_size,
                                 d.size() > 1 ? "s" : "", d.front(),
                                 d.size() > 1 ? fmt::format("-{}", d.back()) : ""));
    }
    out += fmt::format("MTP stages: {}\n", fmt::join(each, ", "));
  } else if (layout.mtp_stage >= 0) {
    out += fmt::format("MTP stage: {} (p={}, v={})\n", layout.mtp_stage, layout.mtp_stage % p_size,
                       layout.mtp_stage / p_size);
  } else {
    out += "MTP stage: none\n";
  }
  out += fmt::format("mtp_standalone: {}\n", layout.mtp_standalone ? "true" : "false");
  return out;
}

}  // namespace mtp::layout
