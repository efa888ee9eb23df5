// Tests of the training loop (run_variant): reproducible records, transport delays that change
// nothing, the one-process-per-rank protocol, and the record's names and attributes.
#include "harness/engine/trainer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "candidate/candidate.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/record/record.h"
#include "harness/transport/transport.h"

namespace mtp::engine {
namespace {

config::ModelConfig tiny() { return config::testing::tiny_model(); }  // N 8, D 2, untied

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(testing::TempDir()) / "mtp_candidate_run_test";
    std::filesystem::create_directories(dir_);
    training_.steps = 2;
    training_.num_microbatches = 4;
    variant_.name = "v";
    variant_.implementation = config::Implementation::kCandidate;
    variant_.layout = "E|t*3|(t|)*4tmm|L";
    variant_.pipeline_size = 4;
  }
  std::string run(const config::VariantSpec& v, const std::string& file, uint64_t delay_seed = 0) {
    RunOptions ro;
    ro.record_path = (dir_ / file).string();
    ro.scenario_name = "test";
    ro.delay_seed = delay_seed;
    run_variant(plan(v), *candidate_, data::DataConfig{}, ro);
    return ro.record_path;
  }
  RunPlan plan(const config::VariantSpec& v) const {
    return plan_variant(tiny(), training_, v, *candidate_);
  }
  static std::string bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::filesystem::path dir_;
  config::TrainingConfig training_;
  config::VariantSpec variant_;
  std::unique_ptr<Implementation> candidate_ = candidate::make_candidate();
};

TEST_F(RunTest, TwoRunsOfOneVariantGiveIdenticalFiles) {
  auto a = run(variant_, "a.h5");
  auto b = run(variant_, "b.h5");
  const std::string ba = bytes(a), bb = bytes(b);
  EXPECT_GT(ba.size(), 100000u);
  EXPECT_TRUE(ba == bb) << "records of two identical runs differ in their bytes";
  record::RecordReader r(a);
  EXPECT_EQ(r.steps(), (std::vector<int>{0, 1, 2}));
}

TEST_F(RunTest, RandomTransportDelaysDoNotChangeTheRecord) {
  auto a = run(variant_, "nodelay.h5");
  auto d = variant_;
  d.transport_max_delay_us = 400;
  for (uint64_t seed : {1u, 2u}) {
    auto b = run(d, "delay" + std::to_string(seed) + ".h5", seed);
    record::RecordReader ra(a), rb(b);
    for (int step : {1, 2}) {
      for (const auto& group : {"loss", "grad", "weight"}) {
        for (const auto& name : ra.names(step, group)) {
          EXPECT_EQ(ra.read(step, group, name).bytes, rb.read(step, group, name).bytes)
              << "seed " << seed << " step " << step << " " << group << "/" << name;
        }
      }
    }
  }
}

// One process per rank, simulated: P threads each run run_variant for one pipeline rank over a
// shared in-process transport (what torchrun + NCCL do across processes). Rank 0 gathers grads,
// losses and weights; the record must equal the all-ranks-in-one-process record in every tensor.
void expect_same_datasets(const std::string& a, const std::string& b) {
  record::RecordReader ra(a), rb(b);
  ASSERT_EQ(ra.steps(), rb.steps());
  for (int step : ra.steps()) {
    ASSERT_EQ(ra.groups(step), rb.groups(step));
    for (const auto& group : ra.groups(step)) {
      ASSERT_EQ(ra.names(step, group), rb.names(step, group)) << group;
      for (const auto& name : ra.names(step, group)) {
        EXPECT_EQ(ra.read(step, group, name).bytes, rb.read(step, group, name).bytes)
            << "step " << step << " " << group << "/" << name;
      }
    }
  }
}

TEST_F(RunTest, OneProcessPerRankProtocolGivesTheSameRecord) {
  for (bool clip : {false, true}) {
    auto v = variant_;
    if (clip) v.clip_grad = 0.05;  // small enough to trigger: exercises the coefficient broadcast
    const std::string single = run(v, clip ? "single_clip.h5" : "single.h5");
    auto tr = transport::make_in_process_transport(4, {});
    const std::string dist = (dir_ / (clip ? "dist_clip.h5" : "dist.h5")).string();
    std::vector<std::thread> threads;
    std::vector<std::string> errors(4);
    for (int r = 0; r < 4; ++r) {
      threads.emplace_back([&, r] {
        try {
          RunOptions ro;
          ro.record_path = dist;
          ro.scenario_name = "test";
          ro.local_ranks = {r};
          ro.transport = tr.get();
          run_variant(plan(v), *candidate_, data::DataConfig{}, ro);
        } catch (const std::exception& e) {
          errors[r] = e.what();
          tr->abort(e.what());
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 4; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
    expect_same_datasets(single, dist);
  }
}

TEST_F(RunTest, RecordsBatchLossGradWeightWithMegatronNames) {
  record::RecordReader r(run(variant_, "names.h5"));
  auto attrs = r.attrs();
  EXPECT_EQ(std::get<std::string>(attrs.at("layout")), "E|t*3|(t|)*4tmm|L");
  EXPECT_EQ(std::get<int64_t>(attrs.at("mtp_standalone")), 1);
  EXPECT_EQ(std::get<std::string>(attrs.at("deterministic_algorithms")), "true");
  EXPECT_EQ(std::get<int64_t>(attrs.at("hidden_size")), 16);
  EXPECT_EQ(std::get<std::string>(attrs.at("data_sha256")).size(), 64u);
  EXPECT_EQ(r.names(1, "loss"), (std::vector<std::string>{"lm", "mtp_1", "mtp_2", "total"}));
  EXPECT_EQ(r.names(1, "batch"), (std::vector<std::string>{"tokens", "labels", "loss_mask"}));
  auto grads = r.names(1, "grad");
  EXPECT_EQ(grads.front(), "embedding.word_embeddings.weight");
  EXPECT_EQ(grads.back(), "output_layer.weight");
  EXPECT_EQ(r.names(0, "weight"), grads);
  auto tokens = r.describe(1, "batch", "tokens");
  EXPECT_EQ(tokens.shape, (std::vector<int64_t>{4, 2, 8}));
  // total = lm + (λ/D)·(mtp_1 + mtp_2), recomputed from the stored values.
  // Losses are stored in the training dtype (float32 here).
  auto val = [&](const char* n) {
    auto t = r.read(1, "loss", n);
    EXPECT_EQ(t.dtype, record::DType::kF32);
    float v;
    std::memcpy(&v, t.bytes.data(), sizeof v);
    return static_cast<double>(v);
  };
  EXPECT_NEAR(val("total"), val("lm") + 0.1 / 2 * (val("mtp_1") + val("mtp_2")), 2e-6);
}

}  // namespace
}  // namespace mtp::engine
