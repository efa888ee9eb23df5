#include "harness/common/temp_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "harness/common/error.h"
#include "harness/common/test_util.h"

namespace mtp {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using testing_util::read_text;
using testing_util::ScratchDir;

TEST(TempFileTest, NamesAreUniqueAndBesideTheFinalFile) {
  ScratchDir dir;
  TempFile a(dir.file("report.json"));
  TempFile b(dir.file("report.json"));
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(parent_directory(a.path()), dir.path());
  EXPECT_THAT(a.path(), MatchesRegex(".*/report\\.json\\.tmp-[0-9]+-[0-9a-f]{12}"));
  EXPECT_EQ(parent_directory("x.h5"), ".");
  EXPECT_EQ(parent_directory("/x.h5"), "/");
}

TEST(TempFileTest, PlantedSymlinkAtTheTemporaryNameIsNeverFollowed) {
  ScratchDir dir;
  const std::string victim = dir.file("victim");
  std::ofstream(victim) << "precious";
  TempFile tmp(dir.file("out.json"));
  std::filesystem::create_symlink(victim, tmp.path());
  EXPECT_THROW(tmp.open_exclusive(), InfraError);
  EXPECT_EQ(tmp.create_error(), EEXIST);
  EXPECT_EQ(read_text(victim), "precious");
  // A temporary this process did not create is not removed either.
  tmp.remove();
  EXPECT_TRUE(std::filesystem::is_symlink(tmp.path()));
}

TEST(TempFileTest, UncommittedTemporaryIsRemovedAndCommittedOneRenamed) {
  ScratchDir dir;
  {
    TempFile tmp(dir.file("a.json"));
    ::close(tmp.open_exclusive());
    EXPECT_THAT(dir.entries(), ::testing::SizeIs(1));
  }
  EXPECT_THAT(dir.entries(), IsEmpty());
  {
    TempFile tmp(dir.file("b.json"));
    ::close(tmp.open_exclusive());
    tmp.commit();
  }
  EXPECT_THAT(dir.entries(), ElementsAre("b.json"));
}

TEST(TempFileTest, SignalsRemoveTemporariesAndExitWith128PlusTheSignal) {
  for (int sig : {SIGTERM, SIGINT}) {
    ScratchDir dir;
    EXPECT_EXIT(
        {
          install_signal_cleanup();
          TempFile a(dir.file("a.h5"));
          TempFile b(dir.file("b.json"));
          ::close(a.open_exclusive());
          ::close(b.open_exclusive());
          ::raise(sig);
          std::_Exit(0);  // not reached
        },
        ::testing::ExitedWithCode(128 + sig), "");
    EXPECT_THAT(dir.entries(), IsEmpty()) << "signal " << sig;
  }
}

TEST(TempFileTest, SignalsRemoveTemporaryDirectoriesWithTheirContent) {
  for (int sig : {SIGTERM, SIGINT, SIGSEGV}) {
    ScratchDir dir;
    ::setenv("TMPDIR", dir.path().c_str(), 1);
    const std::function<bool(int)> died_as_expected =
        sig == SIGSEGV ? std::function<bool(int)>(::testing::KilledBySignal(SIGSEGV))
                       : std::function<bool(int)>(::testing::ExitedWithCode(128 + sig));
    EXPECT_EXIT(
        {
          install_signal_cleanup();
          TempDirectory t("mtp-signal-test");
          std::filesystem::create_directories(t.path() + "/a/b");
          std::ofstream(t.path() + "/a/b/record.h5") << "bytes";
          std::ofstream(t.path() + "/top.h5") << "bytes";
          ::raise(sig);
          std::_Exit(0);  // not reached
        },
        died_as_expected, "");
    ::unsetenv("TMPDIR");
    EXPECT_THAT(dir.entries(), IsEmpty()) << "signal " << sig;
  }
}

TEST(TempFileTest, CrashesAndUncaughtExceptionsRemoveTemporariesAndPrintABacktrace) {
  ScratchDir dir;
  EXPECT_EXIT(
      {
        install_signal_cleanup();
        TempFile a(dir.file("a.h5"));
        ::close(a.open_exclusive());
        std::terminate();  // as an exception escaping a thread does
      },
      ::testing::KilledBySignal(SIGABRT), "mtp-harness: fatal signal 6\nmtp-harness: backtrace");
  EXPECT_THAT(dir.entries(), IsEmpty());
}

TEST(RemoveTreeTest, RemovesNestedContentButNeverFollowsLinks) {
  ScratchDir dir;
  const std::string outside = dir.file("outside.txt");
  std::ofstream(outside) << "kept";
  const std::string tree = dir.file("tree");
  std::filesystem::create_directories(tree + "/a/b");
  std::ofstream(tree + "/a/b/file") << "x";
  std::ofstream(tree + "/top") << "y";
  std::filesystem::create_symlink(outside, tree + "/a/link");
  std::filesystem::create_directory_symlink(dir.path(), tree + "/dirlink");
  remove_tree(tree);
  EXPECT_FALSE(std::filesystem::exists(tree));
  EXPECT_EQ(read_text(outside), "kept");  // the link's target survives
  EXPECT_THAT(dir.entries(), ElementsAre("outside.txt"));
  remove_tree(tree);     // missing: nothing happens
  remove_tree(outside);  // a plain file
  EXPECT_THAT(dir.entries(), IsEmpty());
}

TEST(RemoveTreeTest, TempDirectoryRemovesItselfWithItsContent) {
  std::string path;
  {
    TempDirectory t("mtp-remove-tree-test");
    path = t.path();
    std::filesystem::create_directories(path + "/x/y");
    std::ofstream(path + "/x/y/z.h5") << "record";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace mtp
