#include <fmt/format.h>

#include "candidate/candidate.h"
#include "candidate/split/split.h"
#include "harness/cli/commands.h"
#include "reference/reference.h"

namespace mtp::cli {

std::unique_ptr<engine::Implementation> make_implementation(config::Implementation kind) {
  switch (kind) {
    case config::Implementation::kReference:
      return reference::make_reference();
    case config::Implementation::kCandidate:
      return candidate::make_candidate();
    case config::Implementation::kSplit:
      return split::make_split();
  }
  throw InternalError(fmt::format("no implementation {}", static_cast<int>(kind)));
}

}  // namespace mtp::cli
