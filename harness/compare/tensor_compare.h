// File: harness/compare/tensor_compare.h
//
// The value comparison of one tensor present in both records with the same dtype and shape:
// one linear pass over the raw bytes, no allocation per element.
#pragma once

#include "harness/compare/compare.h"
#include "harness/record/tensor_data.h"

namespace mtp::compare {

/// compare_values: fills the value fields of `diff` (numel, mismatches, bit_mismatches, max_ulp,
/// max_abs, first_index/first_coord and the first element's values and bits) for `a` against
/// `b` under `cls`. REQUIRES: a and b have the same dtype and shape. kDiffer counts bitwise.
/// Integers are exact under every class; their max_ulp is the largest |a − b|.
void compare_values(const record::TensorData& a, const record::TensorData& b,
                    const CompareClass& cls, TensorDiff& diff);

/// compare_chunk: compare_values over elements [first, first + n) of two tensors of `dtype`,
/// given those elements' bytes `pa` and `pb`, accumulating into `diff` (first_index is the flat
/// index in the whole tensor; first_coord is left to the caller). Chunks of one tensor must come
/// in ascending order. `diff.numel` is not touched.
void compare_chunk(const uint8_t* pa, const uint8_t* pb, int64_t first, int64_t n,
                   record::DType dtype, const CompareClass& cls, TensorDiff& diff);

/// finish_values: completes `diff` once every chunk of a tensor of `dtype` was compared (and
/// merged in chunk order): for rel_l2 on a float tensor, sets rel_l2 and max_limit_fraction and,
/// when the tensor is within the bound, clears the elementwise failure fields (every differing
/// element counted as outside while the sums were open). Other classes and integers (exact under
/// every class): nothing.
void finish_values(const CompareClass& cls, record::DType dtype, TensorDiff& diff);

/// unflatten: the multi-index of row-major flat index `flat` in `shape` (empty for a scalar).
std::vector<int64_t> unflatten(int64_t flat, const std::vector<int64_t>& shape);

}  // namespace mtp::compare
