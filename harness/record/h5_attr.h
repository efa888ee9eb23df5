// File: harness/record/h5_attr.h
//
// Scalar attributes of the step record: int64, double or string (AttrValue). Written as
// little-endian int64 / IEEE float64 / fixed-length UTF-8 strings; read from any integer, float or
// string (fixed or variable length) scalar attribute, so files written by h5py read too.
#pragma once

#include <string>
#include <vector>

#include "harness/record/h5.h"
#include "harness/record/record.h"

namespace mtp::record {

/// write_attr: sets scalar attribute `key` of `obj`, replacing an existing one.
void write_attr(const h5::Object& obj, const std::string& key, const AttrValue& value);

/// read_attr: reads scalar attribute `key`; RecordError for a non-scalar or another type.
AttrValue read_attr(const h5::Object& obj, const std::string& key);

/// read_attrs: every attribute of `obj`.
AttrMap read_attrs(const h5::Object& obj);

/// write_u64_matrix_attr: sets attribute `key` of `obj` to `values` as little-endian uint64 of
/// shape [values.size() / cols, cols] (replacing an existing one). values.size() must be a
/// positive multiple of cols.
void write_u64_matrix_attr(const h5::Object& obj, const std::string& key,
                           const std::vector<uint64_t>& values, size_t cols);

/// read_u64_matrix_attr: reads a 2-D integer attribute of `cols` columns into row-major uint64;
/// RecordError for another type or shape.
std::vector<uint64_t> read_u64_matrix_attr(const h5::Object& obj, const std::string& key,
                                           size_t cols);

/// read_string_attr: reads attribute `key`, which must be a scalar string.
std::string read_string_attr(const h5::Object& obj, const std::string& key);

}  // namespace mtp::record
