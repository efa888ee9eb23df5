#include "harness/common/error.h"

#include <fmt/format.h>

namespace mtp {

void internal_assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  throw InternalError(
      fmt::format("internal error at {}:{}: `{}` failed: {}", file, line, cond, msg));
}

}  // namespace mtp
