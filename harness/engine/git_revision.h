// File: harness/engine/git_revision.h
#pragma once

namespace mtp::engine {

/// The source tree's git revision when this binary was built: 12 hex digits of HEAD, with
/// "-dirty" when tracked files differed from it, or "unknown" outside a git checkout. Taken at
/// build time (harness/engine/git_revision.cmake), so a rebuild after a commit records the new
/// one. Records keep it as the root attribute git_revision.
const char* git_revision();

}  // namespace mtp::engine
