// End-to-end checks of replay, --init-from, --save-optimizer-state and --resume (issue 10 items
// 2–4): a default-scenario record replays bitwise EQUAL (from step 0, and from a later step with
// its optimizer state), Megatron-LM's own record replays under the stated tolerance, a changed
// placement is caught, a resumed run equals the uninterrupted one, and bad input exits 2 naming
// the flag, the file or the attribute.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "harness/cli/cli_test_util.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using mtp::cli_test::run;

class ReplayCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::TempDir() + "/cli_replay";
    std::filesystem::create_directories(dir_);
    // The default scenario's standalone candidate, P = 4, V = 2, 3 steps, with its optimizer
    // state.
    const auto r =
        run("run scenarios/default.toml --variant cand_p4v2_tmm --save-optimizer-state "
            "--out " +
            dir_ + "/full.h5");
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static std::string dir_;
};
std::string ReplayCliTest::dir_;

TEST_F(ReplayCliTest, ADefaultScenarioRecordReplaysBitwiseEqual) {
  const auto r = run("replay " + dir_ + "/full.h5 --out " + dir_ + "/replay.h5 --json " + dir_ +
                     "/replay.json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("steps 1-3 from the weights of step 0"));
  EXPECT_THAT(r.out, HasSubstr("# class bitwise: the environment fingerprint matches the "
                               "record's"));
  EXPECT_THAT(r.out, HasSubstr("EQUAL (bitwise)"));
  EXPECT_THAT(r.out, HasSubstr("0 failing tensors"));
  EXPECT_THAT(r.out, Not(HasSubstr("# derived")));  // a harness record needs no derivation
  std::ifstream json(dir_ + "/replay.json");
  const std::string j{std::istreambuf_iterator<char>(json), std::istreambuf_iterator<char>()};
  EXPECT_THAT(j, HasSubstr("\"holds\": true"));
  EXPECT_THAT(j, HasSubstr("\"optimizer\""));  // the saved state is compared too
  // From step 2: the weights and optimizer state of step 1.
  const auto late = run("replay " + dir_ + "/full.h5 --steps 2-");
  EXPECT_EQ(late.code, 0) << late.out;
  EXPECT_THAT(late.out, HasSubstr("steps 2-3 from the weights and optimizer state of step 1"));
  EXPECT_THAT(late.out, HasSubstr("EQUAL (bitwise)"));
}

TEST_F(ReplayCliTest, AnotherPlacementIsCaught) {
  // P = 1 sums the word embedding's 1 + D uses per microbatch in another order (README.md).
  const auto r = run("replay " + dir_ + "/full.h5 --variant-like ref_p1 --steps 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--variant-like ref_p1: reference \"Et*8mmL\""));
  // Which element differs first, and its bits, depend on the BLAS (the goldens pin those); the
  // tensor and the step do not.
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("first divergence: step 1 grad/embedding\\.word_embeddings\\.weight"
                        "\\[10, [0-9]+\\]: a=\\S+ \\(0x[0-9a-f]{8}\\) b=\\S+ \\(0x[0-9a-f]{8}\\)")))
      << r.out;
  const auto same = run("replay " + dir_ + "/full.h5 --variant-like ref_p4v2 --steps 1");
  EXPECT_EQ(same.code, 0) << same.out;
}

TEST_F(ReplayCliTest, ClassGivenWithFlagReplacesTheDerivedOne) {
  // The replay is bitwise equal, so a tolerance holds and "differ" (a negative control) fails.
  const auto tol = run("replay " + dir_ + "/full.h5 --steps 1 --class tol:1e-3,1e-5");
  EXPECT_EQ(tol.code, 0) << tol.out;
  EXPECT_THAT(tol.out, HasSubstr("# class tol:0.001,1e-05: --class"));
  const auto differ = run("replay " + dir_ + "/full.h5 --steps 1 --class differ");
  EXPECT_EQ(differ.code, 1) << differ.out;
  EXPECT_THAT(differ.out, HasSubstr("# class differ: --class"));
  const auto bad = run("replay " + dir_ + "/full.h5 --class nearly");
  EXPECT_EQ(bad.code, 2) << bad.out;
}

TEST_F(ReplayCliTest, MegatronsOwnRecordReplaysUnderTheStatedTolerance) {
  const auto r = run("replay golden/oracle/megatron_selftest_fused.h5");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("# derived: implementation: reference (the record's "
                               "\"megatron-lm (megatron_xcheck/xcheck.py)\""));
  EXPECT_THAT(r.out, HasSubstr("# derived: losses stored in float64"));
  EXPECT_THAT(r.out, HasSubstr("# class tol:0.001,1e-05: the environment differs from the "
                               "record's: device: \"NVIDIA H200\" vs \"cpu\""));
  EXPECT_THAT(r.out, HasSubstr("EQUAL (tol:0.001,1e-05)"));
  EXPECT_THAT(r.out, HasSubstr("42 tensors checked, 42 compared by value"));
  // Its step 2 does not exist, and nothing can resume from its step 1.
  EXPECT_EQ(run("replay golden/oracle/megatron_selftest_fused.h5 --steps 2").code, 2);
}

TEST_F(ReplayCliTest, ResumedRunEqualsTheUninterruptedRun) {
  const auto r =
      run("run scenarios/default.toml --variant cand_p4v2_tmm --save-optimizer-state "
          "--resume " +
          dir_ + "/full.h5:2 --out " + dir_ + "/resumed.h5");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("1 steps"));
  const auto c = run("compare " + dir_ + "/full.h5 " + dir_ +
                     "/resumed.h5 --steps 3 --records "
                     "batch,loss,grad,weight,optimizer");
  EXPECT_EQ(c.code, 0) << c.out;
  EXPECT_THAT(c.out, HasSubstr("EQUAL (bitwise)"));
}

// A resumed variant (scenario key `resume`) runs only after its source: `check --variant` needs
// the source selected, `run` needs the source's record; given it, the run continues bit for bit.
TEST_F(ReplayCliTest, AResumedVariantNeedsItsSourcesRecord) {
  const mtp::testing_util::ScratchDir scratch;  // the suite's directory outlives a run
  const std::string sc = "scenarios/mtp_placements.toml";
  auto r = run("check " + sc + " --variant split_p5_m_m_m_resumed --out " + scratch.file("o"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("variant \"split_p5_m_m_m_resumed\": resumes variant "
                               "\"split_p5_m_m_m\": select it too (--variant split_p5_m_m_m)"));
  r = run("run " + sc + " --variant split_p5_m_m_m_resumed --out " + scratch.file("r.h5"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("give its record, --resume split_p5_m_m_m.h5:1"));
  // Given, the record must be the source's and the step the scenario's.
  r = run("run " + sc + " --variant split_p5_m_m_m_resumed --resume " + dir_ + "/full.h5:1 --out " +
          scratch.file("r2.h5"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("resumes variant \"split_p5_m_m_m\", but --resume " + dir_ +
                               "/full.h5:1 is a record of variant \"cand_p4v2_tmm\""));
  r = run("run " + sc + " --variant split_p5_m_m_m_resumed --resume " + dir_ + "/full.h5:2 --out " +
          scratch.file("r3.h5"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("resumes variant \"split_p5_m_m_m\" at step 1, but --resume"));
  r = run("check " + sc + " --variant split_p5_m_m_m --variant split_p5_m_m_m_resumed --out " +
          scratch.file("o2"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("resumed_split_bitwise +bitwise +PASS"));
}

TEST_F(ReplayCliTest, BadInputExitsTwoNamingFlagFileOrRule) {
  const std::string full = dir_ + "/full.h5";
  auto r = run("run scenarios/default.toml --variant ref_p1 --init-from " + full + ":two");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--init-from \"" + full +
                               ":two\": step \"two\" must be an "
                               "integer in [0, 1000000] (expected REC.h5[:STEP])"));
  r = run("run scenarios/default.toml --variant ref_p1 --resume " + full);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--resume \"" + full +
                               "\": give the step (expected "
                               "REC.h5:STEP)"));
  r = run("run scenarios/default.toml --variant ref_p1 --resume " + full + ":3");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("resume_from step 3 is not before steps = 3"));
  r = run("check scenarios/default.toml --variant ref_p1 --allow-skipped --out " + dir_ +
          "/x --init-from " + dir_ + "/absent.h5");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr(dir_ + "/absent.h5"));
  r =
      run("run scenarios/default.toml --variant ref_p1 --init-from golden/oracle/"
          "megatron_selftest_fused.h5 --out " +
          dir_ + "/x.h5");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("parameter decoder.layers.2.input_layernorm.weight is missing"));
  r = run("replay " + dir_ + "/absent.h5");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run("replay " + full + " --steps 1,3");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--steps 1,3: a replay runs consecutive steps (2 is missing"));
  r = run("replay " + full + " --variant-like no_such_variant");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("no variant named \"no_such_variant\""));
  r = run("replay " + full + " --out " + full);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("is the record being replayed"));
  // A record without optimizer state replays from step 1 only.
  ASSERT_EQ(run("run scenarios/default.toml --variant ref_p1 --out " + dir_ + "/plain.h5").code, 0);
  r = run("replay " + dir_ + "/plain.h5 --steps 2-");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("has no group 'optimizer' (resuming needs the optimizer state of "
                               "the step: record the run with [training] save_optimizer_state = "
                               "true or --save-optimizer-state"));
}

}  // namespace
