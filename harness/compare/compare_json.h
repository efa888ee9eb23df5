// File: harness/compare/compare_json.h
//
// The JSON form of a comparison: everything format_report prints (verdict, counts, the observed
// largest errors, the first divergence with its element, values and bits or its digest block,
// the step/group differences, every failing or bit-differing tensor), for `compare --json`,
// report.json and the HTML report.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/compare/compare.h"

namespace mtp::compare {

/// The version of this layout, written by every JSON output as "schema_version".
inline constexpr int kCompareJsonSchemaVersion = 2;

/// One tensor's result: step, group, name, numel, mismatches, bit_mismatches, max_ulp (null for
/// NaN against a number), max_abs, max_rel, first element (index, coord, a, b, a_bits, b_bits)
/// when one is outside the class, digest fields (by_digest, blocks, differing_blocks,
/// first_block, first_block_coord), structural, and `description` (TensorDiff::describe()).
nlohmann::json to_json(const TensorDiff& d);

/// The whole comparison: class, equal, holds, tensors_checked, tensors_compared,
/// tensors_by_digest, failing_tensors, structural, observed {bit_mismatches, max_ulp, max_abs,
/// max_rel} over every tensor, first_divergence (or null), tensors (every failing or
/// bit-differing tensor, canonical order).
nlohmann::json to_json(const CompareResult& r);

}  // namespace mtp::compare
