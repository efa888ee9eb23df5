// mtp-harness data prepare and Megatron datasets end to end: the committed scenario dataset is
// reproduced byte for byte, and corrupted .idx/.bin files stop `check` with exit 2 and a message
// naming the file, the field and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "harness/cli/cli_test_util.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using mtp::cli_test::Result;
using mtp::cli_test::run;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

const char* kCommitted = "scenarios/data/gpl3_blocks";

TEST(DataCliTest, PrepareReproducesTheCommittedScenarioDataset) {
  const std::string out = testing::TempDir() + "gpl3_blocks";
  auto r = run("data prepare /usr/share/common-licenses/GPL-3 " + out + " --split blank-lines");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("122 documents from 1 file(s) (one per blank-line block), 35150 "
                               "tokens including the EOD (id 0)"));
  for (const char* ext : {".idx", ".bin"}) {
    const std::string want = read_all(std::string(kCommitted) + ext);
    ASSERT_FALSE(want.empty()) << kCommitted << ext;
    EXPECT_TRUE(read_all(out + ext) == want) << out << ext << " differs from " << kCommitted << ext;
  }
}

TEST(DataCliTest, PrepareErrors) {
  EXPECT_EQ(run("data prepare only-one-argument").code, 2);
  EXPECT_EQ(run("data prepare /usr/share/common-licenses/GPL-3 x --split words").code, 2);
  auto missing = run("data prepare /nonexistent/a.txt " + testing::TempDir() + "none");
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.out, HasSubstr("text file '/nonexistent/a.txt' does not exist"));
  const std::string nul = testing::TempDir() + "nul.txt";
  write_all(nul, std::string("ab\0c", 4));
  auto r = run("data prepare " + nul + " " + testing::TempDir() + "none");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("nul.txt' has a 0 byte at offset 2"));
}

// Copies the committed dataset to a temp prefix, applies `edit` to the .idx and .bin bytes, and
// runs `check` on a one-variant scenario that trains on it.
Result check_corrupted(const std::string& name, void (*edit)(std::string& idx, std::string& bin)) {
  const std::string prefix = testing::TempDir() + name;
  std::string idx = read_all(std::string(kCommitted) + ".idx");
  std::string bin = read_all(std::string(kCommitted) + ".bin");
  edit(idx, bin);
  write_all(prefix + ".idx", idx);
  write_all(prefix + ".bin", bin);
  const std::string toml = prefix + ".toml";
  write_all(toml, "[scenario]\nname = \"corrupt\"\n[data]\nkind = \"megatron\"\npath_prefix = \"" +
                      prefix + "\"\n[[variant]]\nname = \"a\"\nimplementation = \"reference\"\n");
  return run("check " + toml + " --out " + testing::TempDir() + "corrupt_runs");
}

TEST(DataCliTest, CheckRejectsCorruptedDatasetsWithExit2) {
  auto magic = check_corrupted("bad_magic", [](std::string& idx, std::string&) { idx[0] = 'X'; });
  EXPECT_EQ(magic.code, 2) << magic.out;
  EXPECT_THAT(magic.out, AllOf(HasSubstr("bad_magic.idx"), HasSubstr("magic at byte 0")));
  auto cut = check_corrupted("cut_idx", [](std::string& idx, std::string&) { idx.resize(100); });
  EXPECT_EQ(cut.code, 2) << cut.out;
  EXPECT_THAT(cut.out, AllOf(HasSubstr("cut_idx.idx"), HasSubstr("truncated: sequence_count 122")));
  auto code = check_corrupted("bad_code", [](std::string& idx, std::string&) { idx[17] = 42; });
  EXPECT_EQ(code.code, 2) << code.out;
  EXPECT_THAT(code.out, AllOf(HasSubstr("bad_code.idx"), HasSubstr("dtype code at byte 17 is 42")));
  auto bin = check_corrupted("short_bin", [](std::string&, std::string& b) { b.resize(1000); });
  EXPECT_EQ(bin.code, 2) << bin.out;
  EXPECT_THAT(bin.out, AllOf(HasSubstr("short_bin.idx"), HasSubstr("short_bin.bin"),
                             HasSubstr("which has 1000 bytes"),
                             HasSubstr("a sequence must lie inside the data file")));
}

}  // namespace
