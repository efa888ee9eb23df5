// Tests of the step recorder's helpers: the revision records carry. (The device-digest path's
// non-finite scan is kernels::block_summaries, tested with its decoding in
// block_summary_test.cc.)
#include "harness/engine/step_recorder.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>

#include "harness/engine/git_revision.h"

namespace mtp::engine {
namespace {

// Issue 20: the revision records carry is taken at build time (it was taken when CMake
// configured, so a rebuild after a commit recorded the commit before).
TEST(GitRevisionTest, IsTheSourceTreesHeadWhenBuilt) {
  const std::string revision = git_revision();
  const std::regex form("[0-9a-f]{12}(-dirty)?|unknown");
  ASSERT_TRUE(std::regex_match(revision, form)) << revision;
  std::FILE* git =
      ::popen("git -C '" MTP_SOURCE_DIR "' rev-parse --short=12 HEAD 2>/dev/null", "r");
  ASSERT_NE(git, nullptr);
  char head[64] = {0};
  const bool read = std::fgets(head, sizeof head, git) != nullptr;
  if (::pclose(git) != 0 || !read) GTEST_SKIP() << "not a git checkout";
  EXPECT_EQ(revision.substr(0, 12), std::string(head).substr(0, 12))
      << "built from another commit than the checkout's HEAD: rebuild (ci/build.sh)";
}

}  // namespace
}  // namespace mtp::engine
