#include "harness/record/h5_dtype.h"

#include <fmt/format.h>

#include <optional>

#include "harness/record/h5_attr.h"
#include "harness/record/record.h"

namespace mtp::record {
namespace {

/// The two byte orders a DType may be stored in.
struct Storage {
  hid_t le;
  hid_t be;
};

Storage storage(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return {H5T_IEEE_F32LE, H5T_IEEE_F32BE};
    case DType::kF64:
      return {H5T_IEEE_F64LE, H5T_IEEE_F64BE};
    case DType::kBF16:
    case DType::kF16:
      return {H5T_STD_U16LE, H5T_STD_U16BE};
    case DType::kI32:
      return {H5T_STD_I32LE, H5T_STD_I32BE};
    case DType::kI64:
      return {H5T_STD_I64LE, H5T_STD_I64BE};
    case DType::kU8:
      return {H5T_STD_U8LE, H5T_STD_U8BE};
  }
  throw InternalError(fmt::format("unknown DType value {}", static_cast<int>(dtype)));
}

bool stores(const h5::Type& type, DType dtype) {
  Storage s = storage(dtype);
  return type.equals(s.le) || type.equals(s.be);
}

[[noreturn]] void dtype_fail(const h5::Dataset& ds, const std::string& what) {
  throw RecordError(fmt::format("{}: {}: {}", ds.where().file, ds.where().path, what));
}

}  // namespace

hid_t file_type(DType dtype) { return storage(dtype).le; }

hid_t memory_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return H5T_NATIVE_FLOAT;
    case DType::kF64:
      return H5T_NATIVE_DOUBLE;
    case DType::kBF16:
    case DType::kF16:
      return H5T_NATIVE_UINT16;
    case DType::kI32:
      return H5T_NATIVE_INT32;
    case DType::kI64:
      return H5T_NATIVE_INT64;
    case DType::kU8:
      return H5T_NATIVE_UINT8;
  }
  throw InternalError(fmt::format("unknown DType value {}", static_cast<int>(dtype)));
}

DType dataset_dtype(const h5::Dataset& ds) {
  h5::Type type = ds.type();
  if (ds.has_attribute(kDTypeAttr)) {
    std::string name = read_string_attr(ds, kDTypeAttr);
    DType dtype;
    try {
      dtype = parse_dtype(name);
    } catch (const InputError& e) {
      dtype_fail(ds, fmt::format("'{}' attribute: {}", kDTypeAttr, e.what()));
    }
    if (!stores(type, dtype)) {
      dtype_fail(ds, fmt::format("'{}' attribute says {} but the HDF5 type is {} (expected {})",
                                 kDTypeAttr, name, type.describe(),
                                 dtype == DType::kBF16 || dtype == DType::kF16
                                     ? "uint16"
                                     : std::string("a standard ") + name + " type"));
    }
    return dtype;
  }
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8}) {
    if (stores(type, d)) {
      return d;
    }
  }
  if (stores(type, DType::kBF16)) {
    dtype_fail(ds, fmt::format("uint16 dataset without a '{}' attribute (bfloat16 or float16?)",
                               kDTypeAttr));
  }
  dtype_fail(ds, fmt::format("unsupported HDF5 type {} (supported: float32, float64, int32, "
                             "int64, uint8, and uint16 with a '{}' attribute)",
                             type.describe(), kDTypeAttr));
}

}  // namespace mtp::record
