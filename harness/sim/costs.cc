#include "harness/sim/costs.h"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "harness/common/error.h"
#include "harness/common/input_file.h"
#include "harness/common/json_input.h"
#include "harness/common/utf8.h"

namespace mtp::sim {

namespace {

/// The costs file's key names (schema version 1), written by to_json and the only ones
/// parse_costs accepts.
namespace key {
constexpr const char* kSchemaVersion = "schema_version";
constexpr const char* kGpu = "gpu";
constexpr const char* kFingerprint = "fingerprint";
constexpr const char* kMeasuredAt = "measured_at";
constexpr const char* kNotes = "notes";
constexpr const char* kNodes = "nodes";
constexpr const char* kLink = "link";
constexpr const char* kForwardMs = "forward_ms";
constexpr const char* kBackwardMs = "backward_ms";
constexpr const char* kLinkName = "name";
constexpr const char* kBandwidth = "bandwidth_gb_per_s";
constexpr const char* kLatency = "latency_us";
}  // namespace key

constexpr std::initializer_list<const char*> kTopLevelKeys = {
    key::kSchemaVersion, key::kGpu,   key::kFingerprint, key::kMeasuredAt,
    key::kNotes,         key::kNodes, key::kLink};
constexpr std::initializer_list<const char*> kNodeKeys = {key::kForwardMs, key::kBackwardMs};
constexpr std::initializer_list<const char*> kLinkKeys = {key::kLinkName, key::kBandwidth,
                                                          key::kLatency};

}  // namespace

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
    case CostNode::kChunkOp:
      return "chunk_op";
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

NodeCost CostTable::at(CostNode n) const {
  const auto it = nodes.find(n);
  if (it == nodes.end() && n == CostNode::kChunkOp) return {};
  if (it == nodes.end()) {
    throw InputError(fmt::format("{}the costs have no node \"{}\" (calibrate measures every node)",
                                 source.empty() ? "" : source + ": ", cost_node_name(n)));
  }
  return it->second;
}

nlohmann::json to_json(const CostTable& t) {
  nlohmann::json j;
  j[key::kSchemaVersion] = 1;
  j[key::kGpu] = t.gpu;
  j[key::kFingerprint] = t.fingerprint.is_null() ? nlohmann::json::object() : t.fingerprint;
  j[key::kMeasuredAt] = t.measured_at.is_null() ? nlohmann::json::object() : t.measured_at;
  j[key::kNotes] = t.notes;
  nlohmann::json nodes = nlohmann::json::object();
  for (const auto& [n, c] : t.nodes) {
    nodes[cost_node_name(n)] = {{key::kForwardMs, c.forward_ms}, {key::kBackwardMs, c.backward_ms}};
  }
  j[key::kNodes] = nodes;
  j[key::kLink] = {{key::kLinkName, t.link.name},
                   {key::kBandwidth, t.link.bandwidth_gb_per_s},
                   {key::kLatency, t.link.latency_us}};
  return j;
}

namespace {

/// The model dimensions a costs file's measured_at may record, each checked against the model.
constexpr std::pair<const char*, int64_t config::ModelConfig::*> kMeasuredDimensions[] = {
    {"hidden_size", &config::ModelConfig::hidden_size},
    {"ffn_hidden_size", &config::ModelConfig::ffn_hidden_size},
    {"num_attention_heads", &config::ModelConfig::num_attention_heads},
    {"vocab_size", &config::ModelConfig::vocab_size},
    {"seq_length", &config::ModelConfig::seq_length},
    {"micro_batch_size", &config::ModelConfig::micro_batch_size}};

/// Throws InputError naming `where` and the first key of `j` (an object) not in `allowed`.
void refuse_unknown_keys(const nlohmann::json& j, std::initializer_list<const char*> allowed,
                         const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) {
      std::string names;
      for (const char* a : allowed) names += std::string(names.empty() ? "" : ", ") + a;
      throw InputError(fmt::format("{}: unknown key \"{}\" (accepted: {})", where,
                                   printable_excerpt(key), names));
    }
  }
}

/// measured_at: an object; each model dimension it records a whole number in [1, 2^63 − 1].
void check_measured_at(const nlohmann::json& m, const std::string& source) {
  if (!m.is_object()) {
    throw InputError(fmt::format("{}: measured_at must be an object", source));
  }
  for (const auto& [key, member] : kMeasuredDimensions) {
    (void)member;
    if (!m.contains(key)) continue;
    const auto& v = m.at(key);
    const bool whole =
        v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t{INT64_MAX} : v.is_number_integer();
    if (!whole || v.get<int64_t>() < 1) {
      throw InputError(
          fmt::format("{}: measured_at.{} = {} must be a whole number >= 1 and "
                      "< 2^63 (the dimension the nodes were timed at)",
                      source, key, printable_excerpt(v.dump())));
    }
  }
}

double number(const nlohmann::json& j, const std::string& key, const std::string& where,
              double max_value) {
  if (!j.contains(key) || !j.at(key).is_number()) {
    throw InputError(fmt::format("{}: {} must be a number", where, key));
  }
  const double v = j.at(key).get<double>();
  if (!std::isfinite(v) || v < 0.0 || v > max_value) {
    throw InputError(
        fmt::format("{}: {} = {} must be finite, >= 0 and <= {:g}", where, key, v, max_value));
  }
  return v;
}

}  // namespace

CostTable parse_costs(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = parse_json(text, source);  // the tool's one JSON reader (bounds, duplicates, 1e999)
  } catch (const InputError& e) {
    // parse_json's message starts with the source; say first what kind of file failed.
    std::string what = e.what();
    if (what.rfind(source + ": ", 0) == 0) what = what.substr(source.size() + 2);
    throw InputError(fmt::format("{}: not JSON that can be read: {}", source, what));
  }
  if (!j.is_object()) throw InputError(fmt::format("{}: the costs must be a JSON object", source));
  if (!j.contains(key::kSchemaVersion) || j[key::kSchemaVersion] != 1) {
    throw InputError(fmt::format("{}: {} must be 1", source, key::kSchemaVersion));
  }
  CostTable t;
  t.source = source;
  if (j.contains(key::kGpu) && j[key::kGpu].is_string()) t.gpu = j[key::kGpu].get<std::string>();
  if (j.contains(key::kFingerprint)) t.fingerprint = j[key::kFingerprint];
  refuse_unknown_keys(j, kTopLevelKeys, source);
  if (j.contains(key::kMeasuredAt)) {
    check_measured_at(j[key::kMeasuredAt], source);
    t.measured_at = j[key::kMeasuredAt];
  }
  if (j.contains(key::kNotes) && j[key::kNotes].is_array()) {
    for (const auto& n : j[key::kNotes]) {
      if (n.is_string()) t.notes.push_back(n.get<std::string>());
    }
  }
  if (!j.contains(key::kNodes) || !j[key::kNodes].is_object()) {
    throw InputError(fmt::format("{}: {} must be an object of node costs", source, key::kNodes));
  }
  for (const auto& [name, value] : j[key::kNodes].items()) {
    const CostNode* node = nullptr;
    for (const CostNode& n : kAllCostNodes) {
      if (name == cost_node_name(n)) node = &n;
    }
    const std::string where = fmt::format("{}: {}.{}", source, key::kNodes, name);
    if (node == nullptr) {
      std::string names;
      for (CostNode n : kAllCostNodes)
        names += std::string(names.empty() ? "" : ", ") + cost_node_name(n);
      throw InputError(fmt::format("{}: not a node kind (accepted: {})", where, names));
    }
    if (!value.is_object()) throw InputError(fmt::format("{}: must be an object", where));
    refuse_unknown_keys(value, kNodeKeys, where);
    t.nodes[*node] = {number(value, key::kForwardMs, where, kMaxNodeMs),
                      number(value, key::kBackwardMs, where, kMaxNodeMs)};
  }
  if (j.contains(key::kLink)) {
    const auto& l = j[key::kLink];
    const std::string where = fmt::format("{}: {}", source, key::kLink);
    if (!l.is_object()) throw InputError(fmt::format("{}: must be an object", where));
    refuse_unknown_keys(l, kLinkKeys, where);
    if (l.contains(key::kLinkName) && l[key::kLinkName].is_string())
      t.link.name = l[key::kLinkName].get<std::string>();
    t.link.bandwidth_gb_per_s = number(l, key::kBandwidth, where, kMaxBandwidthGbPerS);
    t.link.latency_us = number(l, key::kLatency, where, kMaxLatencyUs);
    if (!(t.link.bandwidth_gb_per_s >= kMinBandwidthGbPerS)) {
      throw InputError(
          fmt::format("{}: {} must be >= {:g}", where, key::kBandwidth, kMinBandwidthGbPerS));
    }
  }
  return t;
}

void check_costs_fit(const CostTable& costs, const config::ModelConfig& model) {
  if (!costs.measured_at.is_object()) return;
  for (const auto& [key, member] : kMeasuredDimensions) {
    const auto it = costs.measured_at.find(key);
    if (it == costs.measured_at.end()) continue;
    const int64_t value = model.*member;
    if (it->get<int64_t>() != value) {  // parse_costs checked: a positive int64
      throw InputError(fmt::format(
          "{}: the costs were measured with {} = {} but the model has {} (node costs hold for "
          "the dimensions they were timed at: calibrate this model's preset)",
          costs.source.empty() ? "costs" : costs.source, key, it->get<int64_t>(), value));
    }
  }
}

NodeCost mtp_head_cost(const NodeCost& difference, const NodeCost& lm_head,
                       std::vector<std::string>* notes) {
  auto part = [notes](double d, double lm, const char* what) {
    if (d >= 0.25 * lm) return d;
    if (notes != nullptr) {
      notes->push_back(
          fmt::format("mtp_head {} measured as {:.4f} ms, under a quarter of the LM "
                      "head's {:.4f} ms (the noise of two timings): set to the LM "
                      "head's",
                      what, d, lm));
    }
    return lm;
  };
  return {part(difference.forward_ms, lm_head.forward_ms, "forward"),
          part(difference.backward_ms, lm_head.backward_ms, "backward")};
}

nlohmann::json measured_dimensions(const config::ModelConfig& model) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, member] : kMeasuredDimensions) j[key] = model.*member;
  return j;
}

CostTable read_costs(const std::string& path) {
  const std::vector<uint8_t> bytes = read_input_file(path, "costs file", kMaxSmallInputBytes);
  return parse_costs(std::string(bytes.begin(), bytes.end()), path);
}

}  // namespace mtp::sim
