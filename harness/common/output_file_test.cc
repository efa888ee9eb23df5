#include "harness/common/output_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "harness/common/error.h"
#include "harness/common/test_util.h"

namespace mtp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing_util::FileSizeLimit;
using testing_util::read_text;
using testing_util::ScratchDir;

std::string input_error(const std::string& what, const std::string& path) {
  try {
    check_output_file(what, path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OutputFileTest, WritesTheWholeContentAndLeavesNoTemporary) {
  ScratchDir dir;
  write_file_atomically(dir.file("r.json"), "{\"verdict\": \"pass\"}\n");
  write_file_atomically(dir.file("r.json"), "{}\n");  // replaces
  EXPECT_EQ(read_text(dir.file("r.json")), "{}\n");
  EXPECT_THAT(dir.entries(), ElementsAre("r.json"));
}

TEST(OutputFileTest, WriteFailureFailsAndLeavesNothingUnderTheFinalName) {
  ScratchDir dir;
  const std::string big(1 << 20, 'x');
  {
    FileSizeLimit limit(64 * 1024);  // as a disk that fills up after 64 KiB
    EXPECT_THROW(write_file_atomically(dir.file("new.json"), big), InfraError);
  }
  EXPECT_THAT(dir.entries(), IsEmpty());
  // An older file under the final name stays as it was.
  write_file_atomically(dir.file("old.json"), "old");
  {
    FileSizeLimit limit(64 * 1024);
    try {
      write_file_atomically(dir.file("old.json"), big);
      FAIL() << "no error";
    } catch (const InfraError& e) {
      EXPECT_THAT(e.what(), HasSubstr("old.json: write failed: File too large"));
    }
  }
  EXPECT_EQ(read_text(dir.file("old.json")), "old");
  EXPECT_THAT(dir.entries(), ElementsAre("old.json"));
}

TEST(OutputFileTest, PredictableTemporaryNamesAreNotFollowed) {
  ScratchDir dir;
  std::ofstream(dir.file("victim")) << "precious";
  std::filesystem::create_symlink(dir.file("victim"), dir.file("report.json.tmp"));
  write_file_atomically(dir.file("report.json"), "report");
  EXPECT_EQ(read_text(dir.file("victim")), "precious");
  EXPECT_EQ(read_text(dir.file("report.json")), "report");
}

TEST(OutputFileTest, ConcurrentWritersOfOnePathNeverShareATemporary) {
  ScratchDir dir;
  const std::string path = dir.file("report.json");
  std::vector<std::string> contents;
  for (char c = 'a'; c < 'a' + 6; ++c) contents.emplace_back(256 * 1024, c);
  std::vector<std::thread> writers;
  for (const auto& c : contents) {
    writers.emplace_back([&path, &c] { write_file_atomically(path, c); });
  }
  for (auto& t : writers) t.join();
  const std::string got = read_text(path);
  EXPECT_NE(std::find(contents.begin(), contents.end(), got), contents.end())
      << "the final file mixes writers' content";
  EXPECT_THAT(dir.entries(), ElementsAre("report.json"));
}

TEST(OutputFileTest, UnusableDestinationsAreRefusedBeforeAnyWork) {
  ScratchDir dir;
  EXPECT_THAT(input_error("--json", ""), HasSubstr("--json: the path is empty"));
  EXPECT_THAT(input_error("--json", "/dev/full"),
              HasSubstr("--json /dev/full: exists and is not a regular file"));
  EXPECT_THAT(input_error("--junit", dir.path()), HasSubstr("is a directory"));
  EXPECT_THAT(input_error("--junit", dir.file("x/")), HasSubstr("names a directory"));
  EXPECT_THAT(input_error("--json", dir.file("missing/r.json")),
              HasSubstr("missing': No such file or directory"));
  EXPECT_THAT(input_error("--json", "/proc/r.json"),
              HasSubstr("cannot create files in directory '/proc'"));
  EXPECT_NO_THROW(check_output_file("--json", dir.file("r.json")));
  EXPECT_THAT(dir.entries(), IsEmpty()) << "the probe is removed";
  EXPECT_THROW(check_output_directory("--out", "/proc/runs"), InputError);
  EXPECT_NO_THROW(check_output_directory("--out", dir.file("a/b")));
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("a/b")));
}

TEST(OutputFileTest, NamesTooLongForTheirTemporaryAreRefusedBeforeAnyWork) {
  ScratchDir dir;
  const std::string ok = dir.file(std::string(220, 'n') + ".h5");  // 223 + 28 ≤ 255
  EXPECT_NO_THROW(check_output_file("--out", ok));
  const std::string long_name = dir.file(std::string(240, 'n') + ".h5");
  try {
    check_output_file("--json", long_name);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the name has 243 bytes; with its temporary's suffix"));
  }
}

TEST(OutputFileTest, AnOutputNamingAnInputOrAnotherOutputIsRefused) {
  ScratchDir dir;
  std::ofstream(dir.file("in.h5")) << "record";
  ASSERT_EQ(::link(dir.file("in.h5").c_str(), dir.file("hard.h5").c_str()), 0);
  std::filesystem::create_symlink(dir.file("in.h5"), dir.file("soft.h5"));
  std::filesystem::create_directory(dir.file("sub"));
  for (const std::string& same : {dir.file("in.h5"), dir.file("hard.h5"), dir.file("soft.h5"),
                                  dir.file("sub/../in.h5"), dir.file("./in.h5")}) {
    EXPECT_THROW(check_not_same_file("--json", same, "the record", dir.file("in.h5")), InputError)
        << same;
  }
  // Two outputs that do not exist yet: the same resolved directory and name.
  EXPECT_THROW(
      check_not_same_file("--json", dir.file("sub/../o.json"), "--out", dir.file("o.json")),
      InputError);
  EXPECT_NO_THROW(check_not_same_file("--json", dir.file("o.json"), "--out", dir.file("p.json")));
  EXPECT_NO_THROW(
      check_not_same_file("--json", dir.file("o.json"), "the record", dir.file("in.h5")));
  EXPECT_NO_THROW(check_not_same_file("--json", dir.file("o.json"), "--out", ""));
}

TEST(OutputFileTest, FileRolesRefuseEveryOutputThatNamesAnInputOrAnotherOutput) {
  ScratchDir dir;
  std::ofstream(dir.file("s.toml")) << "name = 's'";
  {
    FileRoles files;  // check S.toml --json S.toml
    files.input("the scenario", dir.file("s.toml"));
    try {
      files.output("--json", dir.file("./s.toml"));
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("is the scenario"));
    }
  }
  {
    FileRoles files;  // --json X --html X; an input registered after the output also collides
    files.output("--json", dir.file("x"));
    EXPECT_THROW(files.output("--html", dir.file("x")), InputError);
    EXPECT_THROW(files.input("the corpus", dir.file("x")), InputError);
    EXPECT_NO_THROW(files.output("--junit", dir.file("y")));
    EXPECT_NO_THROW(files.output("--out", ""));  // not given
  }
  {
    FileRoles files;  // a record planned in a directory that does not exist yet
    files.planned_output("the record of variant \"a\"", dir.file("new/a.h5"));
    EXPECT_THROW(files.output("--json", dir.file("new/../new/a.h5")), InputError);
  }
  EXPECT_THAT(dir.entries(), testing::UnorderedElementsAre("s.toml"));
}

TEST(OutputFileTest, PathsLongerThanTheSystemTakesAreRefusedBeforeAnyWork) {
  ScratchDir dir;
  std::string path = dir.file("");
  while (path.size() < 4090) path += "d/";  // 4,090 bytes of "d/d/…", each name short
  path.resize(4089);
  path += "f";
  try {
    check_output_file("--json", path);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("it would pass the system's limit of 4095 bytes"));
  }
}

}  // namespace
}  // namespace mtp
