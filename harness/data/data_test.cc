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

TEST(DataTest, EdgeBatchesCycleOverGlobalMicrobatches) {
  // "abcdefgh\nij": 11 bytes, b = 2, s = 4, M = 2; windows start at (j·4) mod 7.
  TextFileSource src(write_temp("edge.txt", "abcdefgh\nij"));
  DataConfig cfg;
  cfg.mask_token = '\n';
  cfg.edge_batches = {"first_label_only", "last_label_only", "all_masked", "repeated_token",
                      "data"};
  MicrobatchBuilder builder(src, cfg, 2, 4, 256);
  MicrobatchBuilder plain(src, 2, 4, 256, '\n');
  const Microbatch g0 = builder.build(1, 0, 2);
  EXPECT_EQ(g0.tokens, plain.build(1, 0, 2).tokens);
  EXPECT_EQ(g0.loss_mask, (std::vector<uint8_t>{1, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(builder.build(1, 1, 2).loss_mask, (std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(builder.build(2, 0, 2).loss_mask, std::vector<uint8_t>(8, 0));
  // g = 3: rows j = 6 (window "defgh") and j = 7 (window "abcde") repeat their first token.
  const Microbatch g3 = builder.build(2, 1, 2);
  EXPECT_EQ(g3.tokens, (std::vector<int32_t>{'d', 'd', 'd', 'd', 'a', 'a', 'a', 'a'}));
  EXPECT_EQ(g3.labels, g3.tokens);
  EXPECT_EQ(g3.loss_mask, std::vector<uint8_t>(8, 1));
  // g = 4: "data" — the window "efgh\n" with its '\n' label masked; g = 5 cycles to the first.
  const Microbatch g4 = builder.build(3, 0, 2);
  EXPECT_EQ(g4.tokens, plain.build(3, 0, 2).tokens);
  EXPECT_EQ(g4.loss_mask, (std::vector<uint8_t>{1, 1, 1, 0, 1, 1, 1, 1}));
  EXPECT_EQ(builder.build(3, 1, 2).loss_mask, g0.loss_mask);
  cfg.edge_batches = {"half_masked"};
  EXPECT_THROW(MicrobatchBuilder(src, cfg, 2, 4, 256), InputError);
}

TEST(DataTest, MaskFractionsDropEachMicrobatchsShareOfItsValidLabels) {
  // Microbatch j of a step drops fraction f[j mod n]: with {0, 1}, even ones keep the data's
  // mask and odd ones lose every label, at every step.
  TextFileSource src(write_temp("fractions.txt", "abcdefgh\nij"));
  DataConfig cfg;
  cfg.mask_token = '\n';
  cfg.mask_fractions = {0.0, 1.0};
  MicrobatchBuilder builder(src, cfg, 2, 4, 256);
  MicrobatchBuilder plain(src, 2, 4, 256, '\n');
  for (int64_t step = 1; step <= 3; ++step) {
    EXPECT_EQ(builder.build(step, 0, 4).loss_mask, plain.build(step, 0, 4).loss_mask);
    EXPECT_EQ(builder.build(step, 1, 4).loss_mask, std::vector<uint8_t>(8, 0));
    EXPECT_EQ(builder.build(step, 2, 4).loss_mask, plain.build(step, 2, 4).loss_mask);
  }
  // A half: only valid labels are dropped, about half of them, the same ones on every call.
  std::string text;
  for (int i = 0; i < 4096; ++i) text += static_cast<char>('a' + i % 26);
  TextFileSource big(write_temp("fractions_big.txt", text));
  cfg.mask_fractions = {0.5};
  MicrobatchBuilder half(big, cfg, 4, 64, 256);
  MicrobatchBuilder all(big, 4, 64, 256, '\n');
  const Microbatch h = half.build(2, 3, 4), full = all.build(2, 3, 4);
  EXPECT_EQ(h.loss_mask, half.build(2, 3, 4).loss_mask);
  EXPECT_EQ(h.tokens, full.tokens);
  int kept = 0;
  for (size_t k = 0; k < h.loss_mask.size(); ++k) {
    EXPECT_LE(h.loss_mask[k], full.loss_mask[k]);
    kept += h.loss_mask[k];
  }
  EXPECT_GT(kept, 256 * 35 / 100);
  EXPECT_LT(kept, 256 * 65 / 100);
  EXPECT_NE(h.loss_mask, half.build(3, 3, 4).loss_mask);  // another step, other positions
  cfg.mask_fractions = {1.5};
  EXPECT_THROW(MicrobatchBuilder(src, cfg, 2, 4, 256), InputError);
  // first_two_labels: positions 0 and 1 of each row (depth 1 keeps one token, depth 2 none).
  DataConfig two;
  two.edge_batches = {"first_two_labels"};
  EXPECT_EQ(MicrobatchBuilder(src, two, 2, 4, 256).build(1, 0, 1).loss_mask,
            (std::vector<uint8_t>{1, 1, 0, 0, 1, 1, 0, 0}));
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
              HasSubstr("'/nonexistent/file.txt' does not exist"));
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
