// End-to-end tests of `mtp-harness oracle`: a default-scenario record agrees with the float64
// straight-line program; the same record with one main grad doubled (the embedding counted twice,
// torchtitan #4488), or with the LM loss off by 1e-3, disagrees, naming that tensor; a record
// holding only digests is undecided; a step the record lacks is bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "harness/cli/cli_test_util.h"
#include "harness/record/record.h"

namespace {

using mtp::cli_test::run;
namespace record = mtp::record;

class OracleCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::TempDir() + "/cli_oracle";
    std::filesystem::create_directories(dir_);
    const auto r =
        run("run scenarios/default.toml --variant cand_p4v2_tmm --out " + dir_ + "/full.h5");
    ASSERT_EQ(r.code, 0) << r.out;
  }
  /// A copy of full.h5 at `out` whose tensors pass through `edit(step, group, tensor)`.
  static std::string copy_with(
      const std::string& out,
      const std::function<void(int, const std::string&, record::TensorData&)>& edit) {
    const record::RecordReader in(dir_ + "/full.h5");
    record::RecordWriter w(out);
    for (const auto& [k, v] : in.attrs()) w.set_attr(k, v);
    for (int step : in.steps()) {
      for (const auto& group : in.groups(step)) {
        for (const auto& name : in.names(step, group)) {
          record::TensorData t = in.read(step, group, name);
          edit(step, group, t);
          w.write(step, group, t);
        }
      }
    }
    w.commit();
    return out;
  }
  static std::string dir_;
};
std::string OracleCliTest::dir_;

TEST_F(OracleCliTest, ADefaultScenarioRecordAgrees) {
  const auto r = run("oracle " + dir_ + "/full.h5 --json " + dir_ + "/o.json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# verdict: AGREES (bounds: losses 6.1e-05, grads 6.1e-05, weights "
                       "6.1e-05)"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/o.json"));
  EXPECT_EQ(run("oracle " + dir_ + "/full.h5 --step 3").code, 0);
}

TEST_F(OracleCliTest, ADoubledEmbeddingGradDisagreesNamingIt) {
  const std::string bad =
      copy_with(dir_ + "/twice.h5", [](int step, const std::string& group, record::TensorData& t) {
        if (step == 1 && group == "grad" && t.name == "embedding.word_embeddings.weight") {
          for (size_t i = 0; i < t.bytes.size(); i += 4) {
            float f;
            std::memcpy(&f, &t.bytes[i], 4);
            f *= 2.0f;
            std::memcpy(&t.bytes[i], &f, 4);
          }
        }
      });
  const auto r = run("oracle " + bad);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("DISAGREES"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 of 146 tensors outside, worst step 1 "
                       "grad/embedding.word_embeddings.weight at 1"),
            std::string::npos)
      << r.out;
}

TEST_F(OracleCliTest, ALossOffByOnePartInAThousandDisagrees) {
  const std::string bad =
      copy_with(dir_ + "/lm.h5", [](int step, const std::string& group, record::TensorData& t) {
        if (step == 1 && group == "loss" && t.name == "lm") {
          float f;
          std::memcpy(&f, t.bytes.data(), 4);
          f *= 1.001f;
          std::memcpy(t.bytes.data(), &f, 4);
        }
      });
  const auto r = run("oracle " + bad);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("worst step 1 loss/lm at 0.001"), std::string::npos) << r.out;
}

// Bad records are bad input (exit 2, naming the tensor), not a LibTorch error or a verdict: a
// token id past the vocabulary, a grad of another shape, a loss the model does not have.
TEST_F(OracleCliTest, ABadRecordIsBadInputNamingTheTensor) {
  const std::string token =
      copy_with(dir_ + "/token.h5", [](int step, const std::string& group, record::TensorData& t) {
        if (step == 1 && group == "batch" && t.name == "tokens") {
          const int32_t v = 256;
          std::memcpy(t.bytes.data() + 4 * 5, &v, 4);
        }
      });
  auto r = run("oracle " + token);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("step 1 batch/tokens: element 5 is 256, outside [0, 256)"),
            std::string::npos)
      << r.out;
  const std::string shape =
      copy_with(dir_ + "/shape.h5", [](int step, const std::string& group, record::TensorData& t) {
        if (step == 1 && group == "grad" && t.name == "decoder.final_layernorm.weight") {
          t.shape = {t.shape[0], 1};
        }
      });
  r = run("oracle " + shape);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("decoder.final_layernorm.weight"), std::string::npos) << r.out;
  const std::string loss =
      copy_with(dir_ + "/loss.h5", [](int step, const std::string& group, record::TensorData& t) {
        if (step == 1 && group == "loss" && t.name == "mtp_2") t.name = "mtp_3";
      });
  r = run("oracle " + loss);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("holds the losses {lm, mtp_1, mtp_3, total}"), std::string::npos) << r.out;
  EXPECT_EQ(run("oracle " + dir_ + "/full.h5 --bound nan").code, 2);
}

TEST_F(OracleCliTest, DigestOnlyIsUndecidedAndAMissingStepIsBadInput) {
  const std::string digest = dir_ + "/digest.h5";
  ASSERT_EQ(run("run scenarios/default.toml --variant ref_p1 --record digest --out " + digest).code,
            0);
  auto r = run("oracle " + digest);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("# verdict: UNDECIDED: the record holds only digests of"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--dump-steps 0,1"), std::string::npos) << r.out;
  r = run("oracle " + dir_ + "/full.h5 --step 4");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("has no step 4"), std::string::npos) << r.out;
}

// In check, class "oracle" fails a variant whose shared code is wrong, naming the step and
// tensor and how to re-check; with `detects` the same failure is the expectation's pass.
TEST(OracleExpectationTest, APlantedBugFailsTheOracleInCheckNamingTheTensor) {
  mtp::testing_util::ScratchDir dir;
  // The tiny scenario (its P = 1 pair fails on purpose) with a planted bug in one more variant.
  const std::string sc = mtp::cli_test::tiny_scenario(dir);
  std::string text = mtp::testing_util::read_text(sc);
  text.replace(text.find("name = \"tiny\""), 13, "name = \"tiny\"\nfault_injection = true");
  std::ofstream(sc) << text << R"(
[[variant]]
name = "planted"
implementation = "candidate"
pp = 2
inject = "mtp_loss_main_mask_count"
[[expectation]]
name = "oracle"
variants = ["ref_p2", "planted"]
class = "oracle"
why = "shared code agrees with the float64 program"
[[expectation]]
name = "detector"
variants = ["planted"]
class = "oracle"
detects = "mtp_loss_main_mask_count"
first_divergence = "loss/mtp_1"
first_divergence_step = 1
why = "Megatron-LM #2417"
)";
  const auto r = run("check " + sc + " --out " + dir.file("o"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("## oracle FAILED: planted vs the float64 oracle (oracle/loss)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("first divergence: step 1 loss/mtp_1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# rerun: mtp-harness oracle " + dir.file("o") + "/planted.h5 --step 1"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("PASS   ref_p2 vs oracle/grad"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("caught mtp_loss_main_mask_count at step 1 loss/mtp_1"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("4 expectation(s): 2 passed, 2 failed"), std::string::npos) << r.out;
  // The record names the planted bug.
  EXPECT_NE(run("info " + dir.file("o") + "/planted.h5").out.find("mtp_loss_main_mask_count"),
            std::string::npos);
}

// selftest: every fault of config/fault.h is caught by its detector where faults.toml says.
TEST(SelftestTest, EveryPlantedBugIsCaughtWhereExpected) {
  mtp::testing_util::ScratchDir dir;
  const auto r = run("selftest --quiet --out " + dir.file("st") + " --json " + dir.file("d.json"));
  EXPECT_EQ(r.code, 0) << r.out;
  size_t caught = 0;
  for (size_t at = r.out.find(" CAUGHT\n"); at != std::string::npos;
       at = r.out.find(" CAUGHT\n", at + 1)) {
    ++caught;
  }
  // 11 faults; mtp_embedding_out_of_group caught by three detectors, standalone_stage_fed_zeros
  // by two.
  EXPECT_EQ(caught, 14u) << r.out;
  // Megatron-LM #3943 under CP = 2: the MTP grads halved, seen by the oracle at step 1.
  EXPECT_NE(r.out.find("mtp_loss_scale_without_cp.oracle" + std::string(14, ' ') +
                       "1  grad/embedding.word_embeddings.weight"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("MISSED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("embedding_norm_counted_twice.oracle           1  attr/grad_norm"),
            std::string::npos)
      << r.out;
  // Megatron-Bridge #5380 as a drifted copy at step 1, and as the field saw it: a resumed run's
  // MTP loss jumps at step 2.
  EXPECT_NE(r.out.find("mtp_embedding_out_of_group.replicas" + std::string(11, ' ') +
                       "1  "
                       "copies/embedding.word_embeddings.weight@dp0.stage6"),
            std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find("mtp_embedding_out_of_group.resume" + std::string(13, ' ') + "2  loss/mtp_1"),
      std::string::npos)
      << r.out;
  const std::string json = mtp::testing_util::read_text(dir.file("d.json"));
  EXPECT_NE(json.find("\"source\": \"Megatron-LM #2417\""), std::string::npos) << json;
}

// A planted bug that cannot change the run is refused before training (a record bitwise equal to
// the clean one would prove nothing), naming the missing precondition; selftest's --json may
// not overwrite a record or report of its own run.
TEST(FaultInjectionTest, AFaultThatCannotTakeEffectIsRefusedAndSelftestOutputsDoNotCollide) {
  mtp::testing_util::ScratchDir dir;
  const std::string sc = mtp::cli_test::tiny_scenario(dir);
  std::string text = mtp::testing_util::read_text(sc);
  text.replace(text.find("name = \"tiny\""), 13, "name = \"tiny\"\nfault_injection = true");
  const auto with = [&](const std::string& variant) {
    std::ofstream(sc) << text << "[[variant]]\nname = \"planted\"\nimplementation = "
                      << "\"candidate\"\npp = 2\n"
                      << variant;
    return run("check " + sc + " --variant planted --out " + dir.file("o"));
  };
  auto r = with("inject = \"embedding_norm_counted_twice\"\n");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("variant \"planted\": inject = \"embedding_norm_counted_twice\" needs "
                       "clip_grad > 0"),
            std::string::npos)
      << r.out;
  r = with("inject = \"mtp_scale_without_1_over_d\"\n");  // the tiny model has D = 1
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("needs mtp_num_layers >= 2"), std::string::npos) << r.out;
  r = with("inject = \"standalone_stage_fed_zeros\"\n");
  EXPECT_NE(r.out.find("needs a standalone MTP stage"), std::string::npos) << r.out;
  r = with("inject = \"mtp_embedding_out_of_group\"\nlayout = \"Et|tmL\"\n");
  EXPECT_NE(r.out.find("needs embedding_copy_update = \"broadcast\""), std::string::npos) << r.out;
  r = with("inject = \"mtp_local_token_count\"\n");
  EXPECT_NE(r.out.find("needs calculate_per_token_loss = true"), std::string::npos) << r.out;
  r = with("inject = \"mtp_local_token_count\"\ncalculate_per_token_loss = true\n");
  EXPECT_NE(r.out.find("needs dp >= 2 (at dp = 1 the rank's counts are the global batch's)"),
            std::string::npos)
      << r.out;
  // The per-token loss cannot fold into canonical accumulation: refused, naming both.
  r = with("calculate_per_token_loss = true\naccumulation = \"canonical\"\n");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("accumulation = \"canonical\" needs calculate_per_token_loss = false"),
            std::string::npos)
      << r.out;
  const auto st =
      run("selftest --quiet --out " + dir.file("st") + " --json " + dir.file("st/ref_p4v2.h5"));
  EXPECT_EQ(st.code, 2) << st.out;
  EXPECT_NE(st.out.find("the record of variant \"ref_p4v2\""), std::string::npos) << st.out;
}

}  // namespace
