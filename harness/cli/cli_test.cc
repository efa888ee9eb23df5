// End-to-end checks of the mtp-harness command line: exit codes and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness/cli/cli_test_util.h"

namespace {

using ::testing::HasSubstr;

using mtp::cli_test::run;

std::string temp_file(const std::string& name, const std::string& content) {
  auto path = std::filesystem::path(testing::TempDir()) / name;
  std::ofstream(path) << content;
  return path.string();
}

TEST(CliTest, LayoutPrintsRankMapOrNamesTheBrokenRule) {
  auto ok = run("layout 'E|t*3|(t|)*4tm|L' --pp 4");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_THAT(ok.out, HasSubstr("standalone"));
  auto bad = run("layout 'Et|t|m|L' --pp 2");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("R9"));
  EXPECT_THAT(bad.out, HasSubstr("Et|t|m|L"));
  auto syntax = run("layout 'E|t*|L' --pp 2");
  EXPECT_EQ(syntax.code, 2);
  EXPECT_THAT(syntax.out, HasSubstr("position 4"));
}

TEST(CliTest, ScheduleAndUsageErrors) {
  auto s = run("schedule --pp 2 --vpp 2 --microbatches 4 --group 2");
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_THAT(s.out, HasSubstr("rank 1 warmup  2: F0.0 F0.1 (F1.0 B1.0) (F1.1 B1.1) (F0.2 B0.0) "
                               "(F0.3 B0.1) (F1.2 B1.2) (F1.3 B1.3) B0.2 B0.3"));
  EXPECT_EQ(run("schedule --pp 4 --vpp 2 --microbatches 8 --group 3").code, 2);
  EXPECT_EQ(run("frobnicate").code, 2);
  EXPECT_EQ(run("compare only-one.h5").code, 2);
  EXPECT_EQ(run("layout E --pp 0").code, 2);
}

TEST(CliTest, CompareExitCodesAndBadFiles) {
  EXPECT_EQ(run("compare /nonexistent/a.h5 /nonexistent/b.h5").code, 2);
  auto text = temp_file("not_hdf5.h5", "hello, I am not HDF5\n");
  auto r = run("compare " + text + " " + text);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("not_hdf5.h5"));
}

TEST(CliTest, CheckRejectsBadScenariosWithFileAndLine) {
  auto bad = temp_file("bad.toml", "[scenario]\nname = \"x\"\n[model]\nhidden_size = -3\n");
  auto r = run("check " + bad + " --out " + testing::TempDir() + "/cli_runs");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("bad.toml:4:15"));
  EXPECT_THAT(r.out, HasSubstr("hidden_size = -3 must be >= 1"));
  auto missing = run("check /nonexistent/scenario.toml");
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.out, HasSubstr("/nonexistent/scenario.toml"));
  auto unknown = run("check scenarios/default.toml --variant nope --out " + testing::TempDir() +
                     "/cli_runs");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_THAT(unknown.out, HasSubstr("no variant named \"nope\""));
}

TEST(CliTest, CheckOneVariantPairAndCompareItsRecords) {
  const std::string out = testing::TempDir() + "/cli_runs_pair";
  auto r = run("check scenarios/default.toml --variant cand_p4v2_tmm --variant "
               "cand_p4v2_tmm_lambda02 --out " + out);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("lambda_negative_control"));
  EXPECT_THAT(r.out, HasSubstr("skipped"));
  auto same = run("compare " + out + "/cand_p4v2_tmm.h5 " + out + "/cand_p4v2_tmm.h5");
  EXPECT_EQ(same.code, 0) << same.out;
  auto diff = run("compare " + out + "/cand_p4v2_tmm.h5 " + out + "/cand_p4v2_tmm_lambda02.h5 "
                  "--records grad --steps 1");
  EXPECT_EQ(diff.code, 1) << diff.out;
  EXPECT_THAT(diff.out, HasSubstr("first divergence: step 1 grad/embedding.word_embeddings.weight"));
  EXPECT_TRUE(std::filesystem::exists(out + "/report.json"));
}

}  // namespace
