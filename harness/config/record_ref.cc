#include "harness/config/record_ref.h"

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp::config {

std::string RecordRef::text() const { return fmt::format("{}:{}", path, step); }

RecordRef parse_record_ref(const std::string& text, int64_t default_step) {
  const std::string form = default_step < 0 ? "REC.h5:STEP" : "REC.h5[:STEP]";
  RecordRef ref;
  ref.path = text;
  ref.step = default_step;
  const size_t colon = text.rfind(':');
  if (colon != std::string::npos && text.find_first_of("/.", colon) == std::string::npos) {
    ref.path = text.substr(0, colon);
    const std::string step = text.substr(colon + 1);
    if (step.empty()) {
      throw InputError(
          fmt::format("\"{}\": the step after ':' is empty (expected {})", text, form));
    }
    if (step.size() > 7 || step.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(step) > 1000000) {
      throw InputError(
          fmt::format("\"{}\": step \"{}\" must be an integer in [0, 1000000] "
                      "(expected {})",
                      text, step, form));
    }
    ref.step = std::stoll(step);
  }
  if (ref.path.empty()) {
    throw InputError(fmt::format("\"{}\": the record path is empty (expected {})", text, form));
  }
  if (ref.step < 0) {
    throw InputError(fmt::format("\"{}\": give the step (expected {})", text, form));
  }
  return ref;
}

}  // namespace mtp::config
