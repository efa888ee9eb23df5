#include <fmt/format.h>

#include "candidate/candidate.h"
#include "harness/cli/commands.h"
#include "reference/reference.h"

namespace mtp::cli {

std::unique_ptr<engine::Implementation> make_implementation(const std::string& name) {
  if (name == "reference") return reference::make_reference();
  if (name == "candidate") return candidate::make_candidate();
  throw InputError(fmt::format("unknown implementation \"{}\" (accepted: reference, candidate)", name));
}

}  // namespace mtp::cli
