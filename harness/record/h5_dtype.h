// File: harness/record/h5_dtype.h
//
// How each DType is stored in HDF5. float32/float64/int32/int64/uint8 use the standard HDF5
// types; bfloat16/float16 are stored as uint16 words (HDF5 1.10 has no bf16 type). Every dataset
// also carries a string attribute `dtype` (dtype_name()); the reader trusts it after checking it
// against the HDF5 type.
#pragma once

#include "harness/record/h5.h"
#include "harness/record/tensor_data.h"

namespace mtp::record {

/// Name of the dataset attribute naming the DType.
inline constexpr const char* kDTypeAttr = "dtype";

/// file_type: the little-endian HDF5 type `dtype` is written as (predefined, not owned).
hid_t file_type(DType dtype);

/// memory_type: the native HDF5 type matching TensorData::bytes of `dtype` (predefined).
hid_t memory_type(DType dtype);

/// dataset_dtype: the DType of `ds`. With a `dtype` attribute: that dtype, after checking that
/// the HDF5 type stores it (either byte order). Without: inferred from a standard HDF5 type
/// (uint16 is ambiguous and rejected). Throws RecordError for an unknown dtype attribute, a
/// disagreement, or an unsupported HDF5 type.
DType dataset_dtype(const h5::Dataset& ds);

}  // namespace mtp::record
