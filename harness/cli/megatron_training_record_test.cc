// Megatron-LM's own training runs (issue 21 item 3). golden/oracle/megatron_train_*_init.h5 were
// written by ci/megatron_recorder/record.py on an NVIDIA H200: Megatron-LM d98e8a64dd
// (megatron/core, local spec, DDP, get_megatron_optimizer, forward_backward_no_pipelining,
// finalize_model_grads) trained ci/megatron_recorder/source.toml's model for 3 Adam steps at
// P = 1 in float32 on that run's batches, once from the harness's initial weights and once from
// Megatron's own init. Each record holds every step's batch, losses, main grads, weights and
// Adam moments under the harness's names.
//
// The stated bound (golden/oracle/README.md): one step of the harness's reference, started from
// Megatron's own weights and Adam state of the step before, agrees with Megatron's step within
// 1e-5 relative L2 per tensor (every loss, main grad, weight and moment). Free-running from step
// 0 the runs drift apart: Adam's update is lr·g/(|g| + eps) at step 1, so where a grad is ~1e-10
// its float32 rounding is amplified by lr/eps = 1e5 into the weight. From the harness's init
// the drift stays within 1e-5 over 3 steps (measured 1.1e-6); from Megatron's init it reaches
// 6.4e-6 here and 1.2e-5 on the H200, so that run is held to 1e-4.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "harness/cli/cli_test_util.h"

namespace {

using mtp::cli_test::run;
using ::testing::HasSubstr;

const std::string kHarnessInit = "golden/oracle/megatron_train_harness_init.h5";
const std::string kMegatronInit = "golden/oracle/megatron_train_megatron_init.h5";

TEST(MegatronTrainingRecordTest, EveryStepFromMegatronsOwnStateAgreesWithin1e5) {
  for (const std::string& rec : {kHarnessInit, kMegatronInit}) {
    for (int step = 1; step <= 3; ++step) {
      const auto r =
          run("replay " + rec + " --steps " + std::to_string(step) + " --class rel_l2:1e-5");
      EXPECT_EQ(r.code, 0) << rec << " step " << step << "\n" << r.out;
      EXPECT_THAT(r.out, HasSubstr(step == 1 ? "from the weights of step 0"
                                             : "from the weights and optimizer state of step " +
                                                   std::to_string(step - 1)));
      // losses 4, grads 47, weights 47, moments 2·47 + the step count.
      EXPECT_THAT(r.out, HasSubstr("196 tensors checked, 196 compared by value"));
      EXPECT_THAT(r.out, HasSubstr("EQUAL (rel_l2:1e-05)"));
    }
  }
}

TEST(MegatronTrainingRecordTest, TheRecordsAreMegatronsNumbersNotTheHarnesss) {
  // A negative control: bitwise, or a bound far below float32 rounding, fails.
  const auto tight = run("replay " + kHarnessInit + " --steps 1 --class rel_l2:1e-8");
  EXPECT_EQ(tight.code, 1) << tight.out;
  EXPECT_THAT(tight.out, HasSubstr("DIFFERENT (rel_l2:1e-08)"));
  const auto bits = run("replay " + kHarnessInit + " --steps 1 --class bitwise");
  EXPECT_EQ(bits.code, 1) << bits.out;
  EXPECT_THAT(bits.out, HasSubstr("implementation: reference (the record's \"megatron-lm "
                                  "(ci/megatron_recorder)\""));
}

TEST(MegatronTrainingRecordTest, FreeRunningThreeStepsStayWithinTheirBounds) {
  const auto harness_init = run("replay " + kHarnessInit + " --class rel_l2:1e-5");
  EXPECT_EQ(harness_init.code, 0) << harness_init.out;
  EXPECT_THAT(harness_init.out, HasSubstr("steps 1-3 from the weights of step 0"));
  EXPECT_THAT(harness_init.out, HasSubstr("588 tensors checked, 588 compared by value"));
  const auto megatron_init = run("replay " + kMegatronInit + " --class rel_l2:1e-4");
  EXPECT_EQ(megatron_init.code, 0) << megatron_init.out;
}

TEST(MegatronTrainingRecordTest, TheHarnesssOwnRunMatchesMegatronsFromTheSameStart) {
  const std::string dir = testing::TempDir() + "/megatron_training_record";
  std::filesystem::create_directories(dir);
  const std::string src = dir + "/source.h5";
  const auto made = run("run ci/megatron_recorder/source.toml --variant ref_p1 --out " + src);
  ASSERT_EQ(made.code, 0) << made.out;
  // Megatron started from the harness's initial weights and trained on its batches, bit for bit.
  const auto init =
      run("compare " + src + " " + kHarnessInit + " --steps 0 --records weight --class bitwise");
  EXPECT_EQ(init.code, 0) << init.out;
  EXPECT_THAT(init.out, HasSubstr("bitwise equal (47 tensors"));
  const auto batches =
      run("compare " + src + " " + kHarnessInit + " --records batch --class bitwise");
  EXPECT_EQ(batches.code, 0) << batches.out;
  EXPECT_THAT(batches.out, HasSubstr("bitwise equal (9 tensors"));
  // Every step's losses, main grads and weights: the harness's reference vs Megatron-LM.
  const auto values = run("compare " + src + " " + kHarnessInit + " --class rel_l2:1e-5");
  EXPECT_EQ(values.code, 0) << values.out;
  EXPECT_THAT(values.out, HasSubstr("341 tensors checked, 341 compared by value"));
  // Megatron's record has no digests; against a digest-only harness record its digests are
  // computed from its values: step 0 is decided EQUAL by digest, a tolerance is UNDECIDED.
  const std::string digests = dir + "/digests.h5";
  ASSERT_EQ(
      run("run ci/megatron_recorder/source.toml --variant ref_p1 --record digest --out " + digests)
          .code,
      0);
  const auto by_digest =
      run("compare " + kHarnessInit + " " + digests + " --steps 0 --records weight");
  EXPECT_EQ(by_digest.code, 0) << by_digest.out;
  EXPECT_THAT(by_digest.out, HasSubstr("bitwise equal (47 tensors, 47 of them by digest)"));
  const auto undecided = run("compare " + kHarnessInit + " " + digests + " --class rel_l2:1e-5");
  EXPECT_THAT(undecided.out, HasSubstr("# verdict: UNDECIDED")) << undecided.out;
}

TEST(MegatronTrainingRecordTest, TheComparisonWithMegatronRendersAsCheckDoesItsReport) {
  const std::string dir = testing::TempDir() + "/megatron_training_record_html";
  std::filesystem::create_directories(dir);
  const std::string src = dir + "/source.h5";
  ASSERT_EQ(run("run ci/megatron_recorder/source.toml --variant ref_p1 --out " + src).code, 0);
  const auto pass =
      run("compare " + src + " " + kHarnessInit + " --class rel_l2:1e-5 --html " + dir + "/p.html");
  EXPECT_EQ(pass.code, 0) << pass.out;
  const std::string page = mtp::cli_test::read_file(dir + "/p.html");
  EXPECT_THAT(page, HasSubstr("<h1>compare <span class=\"badge verdict pass\">PASS</span>"));
  EXPECT_THAT(page, HasSubstr("megatron-lm (ci/megatron_recorder)"));  // B's implementation
  EXPECT_THAT(page, HasSubstr("ref_p1"));
  EXPECT_THAT(page, HasSubstr("megatron_harness_init"));
  EXPECT_THAT(page, HasSubstr("rel_l2:1e-05"));
  // Far below float32 rounding it fails: the heatmap names the first divergence.
  const auto fail =
      run("compare " + src + " " + kHarnessInit + " --class rel_l2:1e-8 --html " + dir + "/f.html");
  EXPECT_EQ(fail.code, 1) << fail.out;
  const std::string failed = mtp::cli_test::read_file(dir + "/f.html");
  EXPECT_THAT(failed, HasSubstr("badge verdict fail"));
  EXPECT_THAT(failed, HasSubstr("class=\"cell\""));
  // The page is an output: it may not overwrite a record.
  const auto clash = run("compare " + src + " " + kHarnessInit + " --html " + src);
  EXPECT_EQ(clash.code, 2) << clash.out;
  EXPECT_THAT(clash.out, HasSubstr("--html"));
}

TEST(MegatronTrainingRecordTest, TheFloat64OracleAgreesWithMegatronsEveryStep) {
  // The third implementation: harness/oracle's straight-line float64 program, from the record's
  // own weights (and, after step 1, its Adam moments), checks Megatron's losses, main grads and
  // optimizer step.
  for (const std::string& rec : {kHarnessInit, kMegatronInit}) {
    for (int step = 1; step <= 3; ++step) {
      const auto r = run("oracle " + rec + " --step " + std::to_string(step));
      EXPECT_EQ(r.code, 0) << rec << " step " << step << "\n" << r.out;
      EXPECT_THAT(r.out, HasSubstr("# verdict: AGREES"));
    }
  }
}

}  // namespace
