// read_input_file: whole regular files read, and every other kind of path refused at once with
// the file named (a FIFO or a device must not block or stream for ever).
#include "harness/common/input_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "harness/common/error.h"
#include "harness/common/test_util.h"

namespace mtp {
namespace {

using ::testing::HasSubstr;
using testing_util::ScratchDir;

std::string message_of(const std::string& path, uint64_t max = 1 << 20) {
  try {
    read_input_file(path, "benchmark JSON", max);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(InputFileTest, ReadsEveryByteOfARegularFile) {
  ScratchDir dir;
  std::ofstream(dir.file("a.json"), std::ios::binary) << std::string("{\"x\":\0}", 7);
  const std::vector<uint8_t> got = read_input_file(dir.file("a.json"), "benchmark JSON", 100);
  EXPECT_EQ(std::string(got.begin(), got.end()), std::string("{\"x\":\0}", 7));
  std::ofstream(dir.file("empty"));
  EXPECT_TRUE(read_input_file(dir.file("empty"), "goldens", 100).empty());
}

TEST(InputFileTest, FifosDevicesDirectoriesAndLargeFilesAreRefusedWithoutBlocking) {
  ScratchDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THAT(message_of(dir.file("fifo")), HasSubstr("fifo' is not a regular file"));
  EXPECT_THAT(message_of("/dev/zero"), HasSubstr("benchmark JSON '/dev/zero' is not a regular"));
  std::filesystem::create_symlink("/dev/zero", dir.file("zero.json"));
  EXPECT_THAT(message_of(dir.file("zero.json")), HasSubstr("is not a regular file"));
  EXPECT_THAT(message_of(dir.path()), HasSubstr("is not a regular file"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  std::ofstream(dir.file("big")) << std::string(2000, 'x');
  EXPECT_THAT(message_of(dir.file("big"), 1000), HasSubstr("has 2000 bytes, more than the 1000"));
  // /proc files report size 0: the limit holds while reading.
  EXPECT_THAT(message_of("/proc/self/maps", 16), HasSubstr("more than the 16 bytes"));
  EXPECT_THAT(message_of(dir.file("nope")),
              HasSubstr("benchmark JSON '" + dir.file("nope") + "' does not exist"));
  std::filesystem::create_symlink(dir.file("loop"), dir.file("loop"));
  EXPECT_THAT(message_of(dir.file("loop")), HasSubstr("Too many levels of symbolic links"));
}

}  // namespace
}  // namespace mtp
