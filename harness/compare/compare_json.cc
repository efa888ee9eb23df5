#include "harness/compare/compare_json.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mtp::compare {
namespace {

nlohmann::json ulp_json(uint64_t ulp) {
  if (ulp == std::numeric_limits<uint64_t>::max()) return nullptr;  // NaN against a number
  return ulp;
}

}  // namespace

nlohmann::json to_json(const TensorDiff& d) {
  nlohmann::json j{{"step", d.step},
                   {"group", d.group},
                   {"name", d.name},
                   {"numel", d.numel},
                   {"mismatches", d.mismatches},
                   {"bit_mismatches", d.bit_mismatches},
                   {"max_ulp", ulp_json(d.max_ulp)},
                   {"max_abs", d.max_abs},
                   {"max_rel", d.max_rel},
                   {"failed", d.failed()},
                   {"by_digest", d.by_digest},
                   {"description", d.describe()}};
  if (!d.structural.empty()) j["structural"] = d.structural;
  auto finite_or_null = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; };
  // ulp, tol, rel_l2: the share of the class's limit used (null: infinite, a NaN or inf).
  if (d.max_limit_fraction != 0.0) j["limit_fraction"] = finite_or_null(d.max_limit_fraction);
  if (d.sum_sq_b > 0.0 || d.rel_l2 != 0.0) j["rel_l2"] = finite_or_null(d.rel_l2);
  if (d.first_index >= 0) {
    j["first"] = {{"index", d.first_index}, {"coord", d.first_coord}, {"a", d.a_value},
                  {"b", d.b_value},         {"a_bits", d.a_bits},     {"b_bits", d.b_bits}};
  }
  if (d.first_block >= 0) {
    j["digest"] = {{"blocks", d.blocks},
                   {"differing_blocks", d.differing_blocks},
                   {"first_block", d.first_block},
                   {"first_block_coord", d.first_block_coord},
                   {"block_elements", record::kDigestBlockElements}};
  }
  return j;
}

nlohmann::json to_json(const CompareResult& r) {
  nlohmann::json tensors = nlohmann::json::array();
  int64_t failing = 0, bits = 0;
  uint64_t max_ulp = 0;
  double max_abs = 0.0, max_rel = 0.0;
  for (const TensorDiff& d : r.tensors) {
    failing += d.failed() ? 1 : 0;
    bits += d.bit_mismatches;
    max_ulp = std::max(max_ulp, d.max_ulp);
    max_abs = std::max(max_abs, d.max_abs);
    max_rel = std::max(max_rel, d.max_rel);
    if (d.failed() || d.bit_mismatches > 0) tensors.push_back(to_json(d));
  }
  return {{"schema_version", kCompareJsonSchemaVersion},
          {"class", r.cls.to_string()},
          {"equal", r.equal},
          {"holds", r.holds()},
          {"tensors_checked", r.tensors.size()},
          {"tensors_compared", r.tensors_compared},
          {"tensors_by_digest", r.tensors_by_digest},
          {"failing_tensors", failing},
          {"structural", r.structural},
          {"observed",
           {{"bit_mismatches", bits},
            {"max_ulp", ulp_json(max_ulp)},
            {"max_abs", max_abs},
            {"max_rel", max_rel}}},
          {"first_divergence",
           r.first_divergence ? to_json(*r.first_divergence) : nlohmann::json(nullptr)},
          {"tensors", tensors}};
}

}  // namespace mtp::compare
