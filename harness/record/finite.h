// File: harness/record/finite.h
//
// Non-finite values (NaN, +inf, −inf) in a record. A NaN compares equal to the same NaN bits
// under the bitwise class, so two runs that are NaN alike would pass every expectation; the
// writer therefore scans every float tensor it writes and keeps the first non-finite element in
// the root attribute `first_nonfinite` (written only when there is one, so a finite run's file
// is unchanged), and the checks refuse a record that has it (report/evaluate.cc).
//
// Example:
//   NonFinite nf = find_nonfinite(data, nbytes, DType::kBF16);
//   if (nf.count > 0) … nf.first_index, nonfinite_text(nf.first_bits, DType::kBF16) == "nan"
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/record/tensor_data.h"

namespace mtp::record {

/// Non-finite elements of one tensor: how many, the first's flat index and bit pattern.
struct NonFinite {
  int64_t count = 0;
  int64_t first_index = -1;  ///< −1: none
  uint64_t first_bits = 0;   ///< the first's bits (the low dtype_size bytes)
};

/// Scans `nbytes` bytes of row-major `dtype` elements: an IEEE element is non-finite when its
/// exponent bits are all ones. Integer dtypes hold none. `nbytes` must be a multiple of the
/// element size.
NonFinite find_nonfinite(const void* data, size_t nbytes, DType dtype);

/// "nan", "inf" or "-inf" for a non-finite bit pattern of `dtype`; "finite" otherwise.
std::string nonfinite_text(uint64_t bits, DType dtype);

/// Root attribute naming a record's first non-finite value (JSON, see NonFiniteValue).
inline constexpr const char* kFirstNonFiniteAttr = "first_nonfinite";

/// The first non-finite value of a record, in write order (steps ascending; within a step the
/// order the trainer writes: batch, loss, grad, weight, …), and how many tensors hold any.
struct NonFiniteValue {
  int step = 0;
  std::string group, name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  NonFinite first;      ///< in tensor `group/name`
  int64_t tensors = 0;  ///< tensors of the record with a non-finite element
  /// "step 1 loss/total[] = nan (0x7fc00000): 1 of its elements and 3 tensors of the record are
  /// not finite".
  std::string describe() const;
  /// The attribute's JSON text: {"step", "group", "name", "dtype", "shape", "count", "index",
  /// "bits", "tensors"}.
  std::string to_json() const;
  /// The inverse of to_json for the text read from `source` ("<record>: root attribute
  /// 'first_nonfinite'"), parsed by parse_json (common/json_input.h). Throws RecordError
  /// "<source>: <why>" unless `text` is JSON (with its position otherwise) of an object with
  /// every key of to_json, each of its type, and consistent: step in [0, 999999], group one of
  /// record_groups(), dtype a float dtype, every dimension ≥ 0 and at most 2^62 elements, count in
  /// [1, elements], index in [0, elements), bits a non-finite value of the dtype, tensors ≥ 1.
  static NonFiniteValue from_json(const std::string& text, const std::string& source);
};

}  // namespace mtp::record
