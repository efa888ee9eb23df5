// File: harness/record/tensor_data.h
//
// A torch-free tensor as stored in a step record: name, dtype, shape and the raw bytes in
// row-major (C) order. Bitwise comparison works on these bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mtp::record {

/// Element types a record can hold. bf16/f16 are stored as raw 16-bit words (HDF5 1.10 has no
/// bf16 type) with a `dtype` attribute naming the real type (style_anchors.md §5).
enum class DType { kF32, kF64, kBF16, kF16, kI32, kI64, kU8 };

/// "float32", "float64", "bfloat16", "float16", "int32", "int64", "uint8".
const char* dtype_name(DType dtype);
/// Inverse of dtype_name; throws InputError for any other string.
DType parse_dtype(const std::string& name);
/// Bytes per element.
int dtype_size(DType dtype);
/// True for kF32, kF64, kBF16, kF16.
bool dtype_is_float(DType dtype);

/// One tensor: `bytes.size() == numel() * dtype_size(dtype)`.
struct TensorData {
  std::string name;  ///< global name, e.g. "decoder.layers.0.mlp.linear_fc1.weight"
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  ///< empty for a scalar
  std::vector<uint8_t> bytes;  ///< row-major raw bytes

  int64_t numel() const;
  /// Builds from a float array (copies the bytes). `shape` must multiply to `values.size()`.
  static TensorData from_f32(std::string name, std::vector<int64_t> shape,
                             const std::vector<float>& values);
  static TensorData from_f64(std::string name, std::vector<int64_t> shape,
                             const std::vector<double>& values);
  static TensorData from_i32(std::string name, std::vector<int64_t> shape,
                             const std::vector<int32_t>& values);
  static TensorData from_u8(std::string name, std::vector<int64_t> shape,
                            const std::vector<uint8_t>& values);
};

}  // namespace mtp::record
