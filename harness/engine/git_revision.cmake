# Run at build time (cmake -P, by the harness_engine_git_revision target): writes OUT, a C++ file
# defining mtp::engine::git_revision() as the source tree's `git rev-parse --short=12 HEAD`, with
# "-dirty" when tracked files differ from HEAD ("unknown" outside a git checkout). OUT is
# rewritten only when the text changes, so an unchanged revision recompiles nothing; a commit
# recompiles this one file (the revision was taken at configure time before: a rebuild after a
# commit recorded the old one).
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE failed ERROR_QUIET)
if(failed OR NOT revision)
  set(revision "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no
                  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    string(APPEND revision "-dirty")
  endif()
endif()
set(text "// Generated at build time by harness/engine/git_revision.cmake: do not edit.
#include \"harness/engine/git_revision.h\"

namespace mtp::engine {

const char* git_revision() { return \"${revision}\"; }

}  // namespace mtp::engine
")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
