#include "harness/engine/dtypes.h"

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

}  // namespace mtp::engine
