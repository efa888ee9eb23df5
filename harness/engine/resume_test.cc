// Resume (issue 10 item 4): a run that saves its optimizer state and is resumed at step k from
// its own record gives, in every later step, the bits of the uninterrupted run — batch, losses,
// every grad, every weight and the optimizer state — for the reference and the candidate, with
// DP = 2 and both optimizers (the distributed one gathers its shards to save and takes its
// shard to resume), in fp32 and in bf16 (fp32 masters and moments resumed as recorded). Also: the
// saved state of plain and distributed Adam is the same bits, and the weights of a run started from
// a record (init_from) are those of the record's step.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "candidate/candidate.h"
#include "harness/config/param_specs.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/engine/checkpoint.h"
#include "harness/engine/trainer.h"
#include "harness/record/record.h"
#include "reference/reference.h"

namespace mtp::engine {
namespace {

/// Runs variants of the tiny model (N 8, D 2) on the default text and returns record paths.
class Runs {
 protected:
  explicit Runs(const std::string& dir) : dir_(std::filesystem::path(testing::TempDir()) / dir) {
    std::filesystem::create_directories(dir_);
  }
  std::string run(const config::TrainingConfig& t, const config::VariantSpec& v,
                  const Implementation& impl, const std::string& file) {
    RunOptions ro;
    ro.record_path = (dir_ / file).string();
    run_variant(plan_variant(config::testing::tiny_model(), t, v, impl), impl, data::DataConfig{},
                ro);
    return ro.record_path;
  }
  std::filesystem::path dir_;
};

struct Case {
  const char* name;
  config::Implementation impl;
  const char* layout;
  config::Optimizer optimizer;
  config::DType dtype = config::DType::kFloat32;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

class ResumeTest : public ::testing::TestWithParam<Case>, public Runs {
 protected:
  ResumeTest() : Runs("mtp_engine_resume_test") {}
  void SetUp() override {
    training_.steps = 3;
    training_.num_microbatches = 2;
    training_.save_optimizer_state = true;
    training_.dtype = GetParam().dtype;
    variant_.name = GetParam().name;
    variant_.implementation = GetParam().impl;
    variant_.layout = GetParam().layout;
    variant_.pipeline_size = 4;
    variant_.data_parallel_size = 2;
    variant_.optimizer = GetParam().optimizer;
    impl_ = GetParam().impl == config::Implementation::kReference ? reference::make_reference()
                                                                  : candidate::make_candidate();
  }
  std::string run(const config::TrainingConfig& t, const std::string& file) {
    return Runs::run(t, variant_, *impl_, variant_.name + "_" + file);
  }
  config::TrainingConfig training_;
  config::VariantSpec variant_;
  std::unique_ptr<Implementation> impl_;
};

/// Every dataset of `groups` at `step` has the same bytes in both records (and the same names).
void expect_same_step(const record::RecordReader& a, const record::RecordReader& b, int step,
                      const std::vector<std::string>& groups, const std::string& what) {
  for (const auto& g : groups) {
    ASSERT_EQ(a.names(step, g), b.names(step, g)) << what << " step " << step << " " << g;
    for (const auto& n : a.names(step, g)) {
      EXPECT_EQ(a.read(step, g, n).bytes, b.read(step, g, n).bytes)
          << what << ": step " << step << " " << g << "/" << n << " differs";
    }
  }
}

TEST_P(ResumeTest, ResumedAtEachStepIsBitwiseTheUninterruptedRun) {
  const std::string full = run(training_, "full.h5");
  const record::RecordReader f(full);
  ASSERT_EQ(f.steps(), (std::vector<int>{0, 1, 2, 3}));
  const bool bf16 = GetParam().dtype == config::DType::kBFloat16;
  // Step 0: weights only (zero optimizer state is not recorded).
  EXPECT_EQ(f.groups(0), bf16 ? (std::vector<std::string>{"weight", "model_weight"})
                              : (std::vector<std::string>{"weight"}));
  // bf16: "weight" holds the fp32 masters, "model_weight" the bf16 parameters; a resumed run
  // must take the masters as recorded, not re-made from the bf16 parameters.
  const std::vector<std::string> start_groups =
      bf16 ? std::vector<std::string>{"weight", "model_weight", "optimizer"}
           : std::vector<std::string>{"weight", "optimizer"};
  EXPECT_EQ(f.groups(2),
            bf16 ? (std::vector<std::string>{"batch", "loss", "grad", "weight", "model_weight",
                                             "optimizer"})
                 : (std::vector<std::string>{"batch", "loss", "grad", "weight", "optimizer"}));
  for (int k : {1, 2}) {
    config::TrainingConfig t = training_;
    t.resume_from = config::RecordRef{full, k};
    const std::string resumed = run(t, "resumed" + std::to_string(k) + ".h5");
    const record::RecordReader r(resumed);
    std::vector<int> want{k};
    for (int s = k + 1; s <= 3; ++s) want.push_back(s);
    ASSERT_EQ(r.steps(), want);
    // The starting point as the run saw it, then every later step.
    expect_same_step(f, r, k, start_groups, "resumed at " + std::to_string(k));
    for (int s = k + 1; s <= 3; ++s) {
      expect_same_step(f, r, s, f.groups(s), "resumed at " + std::to_string(k));
    }
    const record::AttrMap attrs = r.attrs();
    EXPECT_EQ(std::get<std::string>(attrs.at("resumed_from")), full);
    EXPECT_EQ(std::get<int64_t>(attrs.at("resumed_from_step")), k);
    EXPECT_EQ(std::get<std::string>(attrs.at("resumed_from_sha256")).size(), 64u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    DP2, ResumeTest,
    ::testing::Values(Case{"ref_adam", config::Implementation::kReference, "Et*2|t*2|t*2|t*2mmL",
                           config::Optimizer::kAdam},
                      Case{"ref_dist", config::Implementation::kReference, "Et*2|t*2|t*2|t*2mmL",
                           config::Optimizer::kDistributedAdam},
                      Case{"cand_adam", config::Implementation::kCandidate, "Et*3|t*3|t*2mm|L",
                           config::Optimizer::kAdam},
                      Case{"cand_dist", config::Implementation::kCandidate, "Et*3|t*3|t*2mm|L",
                           config::Optimizer::kDistributedAdam},
                      Case{"ref_adam_bf16", config::Implementation::kReference,
                           "Et*2|t*2|t*2|t*2mmL", config::Optimizer::kAdam,
                           config::DType::kBFloat16},
                      Case{"cand_dist_bf16", config::Implementation::kCandidate, "Et*3|t*3|t*2mm|L",
                           config::Optimizer::kDistributedAdam, config::DType::kBFloat16}),
    case_name);

/// Runs of the reference at P = 2, DP = 2 for the start-state tests.
class StartStateTest : public ::testing::Test, public Runs {
 protected:
  StartStateTest() : Runs("mtp_engine_start_state_test") {
    training_.steps = 2;
    training_.num_microbatches = 2;
    variant_.name = "v";
    variant_.layout = "Et*4|t*4mmL";
    variant_.pipeline_size = 2;
    variant_.data_parallel_size = 2;
  }
  std::string run(const config::TrainingConfig& t, const config::VariantSpec& v,
                  const std::string& file) {
    return Runs::run(t, v, *impl_, file);
  }
  config::TrainingConfig training_;
  config::VariantSpec variant_;
  std::unique_ptr<Implementation> impl_ = reference::make_reference();
};

TEST_F(StartStateTest, PlainAndDistributedAdamSaveTheSameState) {
  config::TrainingConfig t = training_;
  t.save_optimizer_state = true;
  const record::RecordReader plain(run(t, variant_, "plain.h5"));
  config::VariantSpec d = variant_;
  d.optimizer = config::Optimizer::kDistributedAdam;
  const record::RecordReader dist(run(t, d, "dist.h5"));
  for (int s : {1, 2}) expect_same_step(plain, dist, s, {"weight", "optimizer"}, "plain vs dist");
  // Real values: step counts, and moments that moved off zero.
  const record::TensorData count = plain.read(2, record::Group::kOptimizer, kOptimizerStepName);
  EXPECT_EQ(count.dtype, record::DType::kF64);
  EXPECT_EQ(*reinterpret_cast<const double*>(count.bytes.data()), 2.0);
  const record::TensorData m =
      plain.read(1, record::Group::kOptimizer, exp_avg_name(config::kWordEmbeddingName));
  const float* v = reinterpret_cast<const float*>(m.bytes.data());
  EXPECT_NE(*std::max_element(v, v + m.numel()), 0.0f);
}

TEST_F(StartStateTest, InitFromTakesTheWeightsOfTheStepAndSaysWhereFrom) {
  const std::string src = run(training_, variant_, "src.h5");
  config::TrainingConfig t = training_;
  t.steps = 1;
  t.init_from = config::RecordRef{src, 2};
  const record::RecordReader a(src), b(run(t, variant_, "init.h5"));
  for (const auto& n : a.names(2, "weight")) {
    EXPECT_EQ(a.read(2, "weight", n).bytes, b.read(0, "weight", n).bytes) << n;
  }
  const record::AttrMap attrs = b.attrs();
  EXPECT_EQ(std::get<std::string>(attrs.at("init_from")), src);
  EXPECT_EQ(std::get<int64_t>(attrs.at("init_from_step")), 2);
  EXPECT_EQ(attrs.count("resumed_from"), 0u);
  // From other weights than the seed's, the first step's losses differ from the seed run's.
  EXPECT_NE(a.read(1, "loss", "total").bytes, b.read(1, "loss", "total").bytes);
}

TEST_F(StartStateTest, ResumeErrorsNameTheRecordAndTheRule) {
  const std::string plain = run(training_, variant_, "nostate.h5");
  config::TrainingConfig t = training_;
  t.resume_from = config::RecordRef{plain, 1};
  auto error_of = [&](const config::TrainingConfig& tc) -> std::string {
    try {
      run(tc, variant_, "bad.h5");
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error_of(t),
            plain +
                ": steps/000001/optimizer: has no group 'optimizer' (resuming "
                "needs the optimizer state of the step: record the run with [training] "
                "save_optimizer_state = true or --save-optimizer-state; the step has: "
                "batch, loss, grad, weight)");
  t.resume_from = config::RecordRef{plain, 2};
  EXPECT_EQ(error_of(t),
            "training: resume_from step 2 is not before steps = 2 (nothing left to "
            "run)");
  t.resume_from = config::RecordRef{plain, 0};
  t.dtype = config::DType::kFloat64;
  EXPECT_NE(error_of(t).find("steps/000000/weight/embedding.word_embeddings.weight: dtype "
                             "float32, but the run trains in float64"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad.h5"));
}

}  // namespace
}  // namespace mtp::engine
