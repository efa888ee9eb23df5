// File: harness/record/h5_attr.h
//
// Scalar attributes of the step record: int64, double or string (AttrValue). Written as
// little-endian int64 / IEEE float64 / fixed-length UTF-8 strings; read from any integer, float or
// string (fixed or variable length) scalar attribute, so files written by h5py read too.
#pragma once

#include <string>

#include "harness/record/h5.h"
#include "harness/record/record.h"

namespace mtp::record {

/// write_attr: sets scalar attribute `key` of `obj`, replacing an existing one.
void write_attr(const h5::Object& obj, const std::string& key, const AttrValue& value);

/// read_attr: reads scalar attribute `key`; RecordError for a non-scalar or another type.
AttrValue read_attr(const h5::Object& obj, const std::string& key);

/// read_attrs: every attribute of `obj`.
AttrMap read_attrs(const h5::Object& obj);

/// read_string_attr: reads attribute `key`, which must be a scalar string.
std::string read_string_attr(const h5::Object& obj, const std::string& key);

}  // namespace mtp::record
