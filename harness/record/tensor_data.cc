#include "harness/record/tensor_data.h"

#include <fmt/format.h>

#include <cstring>

#include "harness/common/error.h"

namespace mtp::record {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  int size;
  bool is_float;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "float32", 4, true},   {DType::kF64, "float64", 8, true},
    {DType::kBF16, "bfloat16", 2, true}, {DType::kF16, "float16", 2, true},
    {DType::kI32, "int32", 4, false},    {DType::kI64, "int64", 8, false},
    {DType::kU8, "uint8", 1, false},
};

const DTypeInfo& info(DType dtype) {
  for (const DTypeInfo& i : kDTypes) {
    if (i.dtype == dtype) {
      return i;
    }
  }
  throw InternalError(fmt::format("unknown DType value {}", static_cast<int>(dtype)));
}

template <typename T>
TensorData from_values(std::string name, std::vector<int64_t> shape, DType dtype,
                       const std::vector<T>& values) {
  TensorData t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  MTP_INTERNAL_ASSERT(t.numel() == static_cast<int64_t>(values.size()),
                      fmt::format("tensor '{}': shape has {} elements but {} values given", t.name,
                                  t.numel(), values.size()));
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) {
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  }
  return t;
}

}  // namespace

const char* dtype_name(DType dtype) { return info(dtype).name; }

DType parse_dtype(const std::string& name) {
  for (const DTypeInfo& i : kDTypes) {
    if (name == i.name) {
      return i.dtype;
    }
  }
  throw InputError(fmt::format(
      "unknown dtype '{}' (expected float32, float64, bfloat16, float16, int32, int64 or uint8)",
      name));
}

int dtype_size(DType dtype) { return info(dtype).size; }

bool dtype_is_float(DType dtype) { return info(dtype).is_float; }

int64_t TensorData::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    n *= d;
  }
  return n;
}

TensorData TensorData::from_f32(std::string name, std::vector<int64_t> shape,
                                const std::vector<float>& values) {
  return from_values(std::move(name), std::move(shape), DType::kF32, values);
}

TensorData TensorData::from_f64(std::string name, std::vector<int64_t> shape,
                                const std::vector<double>& values) {
  return from_values(std::move(name), std::move(shape), DType::kF64, values);
}

TensorData TensorData::from_i32(std::string name, std::vector<int64_t> shape,
                                const std::vector<int32_t>& values) {
  return from_values(std::move(name), std::move(shape), DType::kI32, values);
}

TensorData TensorData::from_u8(std::string name, std::vector<int64_t> shape,
                               const std::vector<uint8_t>& values) {
  return from_values(std::move(name), std::move(shape), DType::kU8, values);
}

}  // namespace mtp::record
