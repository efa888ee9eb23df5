#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "harness/common/error.h"
#include "harness/data/microbatch.h"
#include "harness/data/token_source.h"

namespace mtp::data {
namespace {

using ::testing::HasSubstr;

std::string write_temp(const std::string& name, const std::string& content) {
  std::string path = testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(DataTest, Sha256OfKnownVectors) {
  EXPECT_EQ(sha256_hex(reinterpret_cast<const uint8_t*>(""), 0),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(reinterpret_cast<const uint8_t*>("abc"), 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(DataTest, WindowsTokensLabelsAndMask) {
  // "abcdefghij\n" — 11 bytes; s = 4, b = 2, M = 2.
  TextFileSource src(write_temp("mb.txt", "abcdefgh\nij"));
  EXPECT_EQ(src.size(), 11);
  MicrobatchBuilder builder(src, 2, 4, 256, '\n');
  // step 1, mb 1, row 0 → j = 2 → start = 8 mod 7 = 1: tokens "bcde", labels "cdef".
  Microbatch mb = builder.build(1, 1, 2);
  EXPECT_EQ(mb.tokens[0], 'b');
  EXPECT_EQ(mb.tokens[3], 'e');
  EXPECT_EQ(mb.labels[0], 'c');
  EXPECT_EQ(mb.labels[3], 'f');
  // row 1 → j = 3 → start = 12 mod 7 = 5: tokens "fgh\n", labels "gh\ni": label '\n' masked.
  EXPECT_EQ(mb.tokens[4], 'f');
  EXPECT_EQ(mb.labels[6], '\n');
  EXPECT_EQ((std::vector<uint8_t>(mb.loss_mask.begin() + 4, mb.loss_mask.end())),
            (std::vector<uint8_t>{1, 1, 0, 1}));
  // Same inputs, same microbatch.
  Microbatch again = builder.build(1, 1, 2);
  EXPECT_EQ(again.tokens, mb.tokens);
}

TEST(DataTest, ClearErrors) {
  EXPECT_THROW(TextFileSource("/nonexistent/file.txt"), InputError);
  EXPECT_THROW(TextFileSource(write_temp("empty.txt", "")), InputError);
  TextFileSource tiny(write_temp("tiny.txt", "abc"));
  EXPECT_THROW(MicrobatchBuilder(tiny, 1, 4, 256, -1), InputError);
  EXPECT_THROW(MicrobatchBuilder(tiny, 1, 2, 100, -1), InputError);
  DataConfig bad;
  bad.kind = "parquet";
  EXPECT_THROW(open_token_source(bad), InputError);
}

// Defect: a symlink loop was reported as "does not exist", and /proc/self/mem (a regular file
// that cannot be read) ended in an iostream exception (exit 3). Both are bad input that names
// the file and the system's reason.
TEST(DataTest, UnusableCorpusErrorsNameTheFileAndTheReason) {
  auto error_of = [](const std::string& path) {
    try {
      TextFileSource src(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string loop = testing::TempDir() + "loop.txt";
  std::remove(loop.c_str());
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  EXPECT_THAT(error_of(loop), HasSubstr("'" + loop + "': Too many levels of symbolic links"));
  EXPECT_THAT(error_of("/nonexistent/file.txt"),
              HasSubstr("'/nonexistent/file.txt': No such file or directory"));
  EXPECT_THAT(error_of("/proc/self/mem"),
              HasSubstr("cannot read text file '/proc/self/mem': Input/output error"));
  EXPECT_THAT(error_of("/dev/null"), HasSubstr("'/dev/null' is not a regular file"));
  EXPECT_THAT(error_of(write_temp("empty.txt", "")), HasSubstr("is empty"));
  // Files in /proc report size 0 but are read to the end.
  EXPECT_GT(TextFileSource("/proc/self/status").size(), 10);
}

TEST(DataTest, DefaultCorpusIsThere) {
  auto src = open_token_source(DataConfig{});
  EXPECT_EQ(src->size(), 35149);
  EXPECT_EQ(src->sha256().size(), 64u);
}

}  // namespace
}  // namespace mtp::data
