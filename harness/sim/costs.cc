#include "harness/sim/costs.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "harness/common/error.h"

namespace mtp::sim {

const char* cost_node_name(CostNode n) {
  switch (n) {
    case CostNode::kEmbedding:
      return "embedding";
    case CostNode::kDecoderDense:
      return "decoder_dense";
    case CostNode::kDecoderMoe:
      return "decoder_moe";
    case CostNode::kMtpBlockDense:
      return "mtp_block_dense";
    case CostNode::kMtpBlockMoe:
      return "mtp_block_moe";
    case CostNode::kFinalLayernorm:
      return "final_layernorm";
    case CostNode::kOutputHead:
      return "output_head";
    case CostNode::kMtpHead:
      return "mtp_head";
  }
  return "?";
}

Link named_link(std::string_view name) {
  Link l;
  if (name == "nvlink") return l;
  if (name == "ib") {
    l.name = "ib";
    l.bandwidth_gb_per_s = 50.0;
    l.latency_us = 5.0;
    return l;
  }
  throw InputError(fmt::format("link \"{}\": accepted: nvlink, ib", name));
}

const NodeCost& CostTable::at(CostNode n) const {
  const auto it = nodes.find(n);
  if (it == nodes.end()) {
    throw InputError(fmt::format("the costs have no node \"{}\" (calibrate measures every node)",
                                 cost_node_name(n)));
  }
  return it->second;
}

nlohmann::json to_json(const CostTable& t) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["gpu"] = t.gpu;
  j["fingerprint"] = t.fingerprint.is_null() ? nlohmann::json::object() : t.fingerprint;
  j["measured_at"] = t.measured_at.is_null() ? nlohmann::json::object() : t.measured_at;
  j["notes"] = t.notes;
  nlohmann::json nodes = nlohmann::json::object();
  for (const auto& [n, c] : t.nodes) {
    nodes[cost_node_name(n)] = {{"forward_ms", c.forward_ms}, {"backward_ms", c.backward_ms}};
  }
  j["nodes"] = nodes;
  j["link"] = {{"name", t.link.name},
               {"bandwidth_gb_per_s", t.link.bandwidth_gb_per_s},
               {"latency_us", t.link.latency_us}};
  return j;
}

namespace {

double number(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_number()) {
    throw InputError(fmt::format("{}: {} must be a number", where, key));
  }
  const double v = j.at(key).get<double>();
  if (!std::isfinite(v) || v < 0.0) {
    throw InputError(fmt::format("{}: {} = {} must be finite and >= 0", where, key, v));
  }
  return v;
}

}  // namespace

CostTable parse_costs(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: not JSON: {}", source, e.what()));
  }
  if (!j.is_object()) throw InputError(fmt::format("{}: the costs must be a JSON object", source));
  if (!j.contains("schema_version") || j["schema_version"] != 1) {
    throw InputError(fmt::format("{}: schema_version must be 1", source));
  }
  CostTable t;
  if (j.contains("gpu") && j["gpu"].is_string()) t.gpu = j["gpu"].get<std::string>();
  if (j.contains("fingerprint")) t.fingerprint = j["fingerprint"];
  if (j.contains("measured_at")) t.measured_at = j["measured_at"];
  if (j.contains("notes") && j["notes"].is_array()) {
    for (const auto& n : j["notes"]) {
      if (n.is_string()) t.notes.push_back(n.get<std::string>());
    }
  }
  if (!j.contains("nodes") || !j["nodes"].is_object()) {
    throw InputError(fmt::format("{}: nodes must be an object of node costs", source));
  }
  for (const auto& [key, value] : j["nodes"].items()) {
    const CostNode* node = nullptr;
    for (const CostNode& n : kAllCostNodes) {
      if (key == cost_node_name(n)) node = &n;
    }
    const std::string where = fmt::format("{}: nodes.{}", source, key);
    if (node == nullptr) {
      std::string names;
      for (CostNode n : kAllCostNodes)
        names += std::string(names.empty() ? "" : ", ") + cost_node_name(n);
      throw InputError(fmt::format("{}: not a node kind (accepted: {})", where, names));
    }
    if (!value.is_object()) throw InputError(fmt::format("{}: must be an object", where));
    t.nodes[*node] = {number(value, "forward_ms", where), number(value, "backward_ms", where)};
  }
  if (j.contains("link")) {
    const auto& l = j["link"];
    const std::string where = fmt::format("{}: link", source);
    if (!l.is_object()) throw InputError(fmt::format("{}: must be an object", where));
    if (l.contains("name") && l["name"].is_string()) t.link.name = l["name"].get<std::string>();
    t.link.bandwidth_gb_per_s = number(l, "bandwidth_gb_per_s", where);
    t.link.latency_us = number(l, "latency_us", where);
    if (!(t.link.bandwidth_gb_per_s > 0.0)) {
      throw InputError(fmt::format("{}: bandwidth_gb_per_s must be > 0", where));
    }
  }
  return t;
}

CostTable read_costs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the costs file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_costs(ss.str(), path);
}

}  // namespace mtp::sim
