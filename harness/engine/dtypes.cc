#include "harness/engine/dtypes.h"

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp::engine {

at::ScalarType scalar_type(config::DType d) {
  switch (d) {
    case config::DType::kFloat64:
      return at::kDouble;
    case config::DType::kBFloat16:
      return at::kBFloat16;
    case config::DType::kFloat32:
      break;
  }
  return at::kFloat;
}

at::ScalarType main_type(config::DType d) {
  return d == config::DType::kBFloat16 ? at::kFloat : scalar_type(d);
}

record::DType record_dtype(at::ScalarType t, const std::string& what) {
  switch (t) {
    case at::kFloat:
      return record::DType::kF32;
    case at::kDouble:
      return record::DType::kF64;
    case at::kBFloat16:
      return record::DType::kBF16;
    case at::kHalf:
      return record::DType::kF16;
    case at::kInt:
      return record::DType::kI32;
    case at::kLong:
      return record::DType::kI64;
    case at::kByte:
      return record::DType::kU8;
    default:
      throw InternalError(fmt::format("cannot record dtype {} of {}", c10::toString(t), what));
  }
}

}  // namespace mtp::engine
