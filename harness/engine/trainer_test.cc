// Tests of the training loop (run_variant): reproducible records, transport delays that change
// nothing, the one-process-per-rank protocol, and the record's names and attributes.
#include "harness/engine/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "candidate/candidate.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/data/microbatch.h"
#include "harness/record/record.h"
#include "harness/transport/transport.h"
#include "reference/reference.h"

namespace mtp::engine {
namespace {

config::ModelConfig tiny() { return config::testing::tiny_model(); }  // N 8, D 2, untied

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(testing::TempDir()) / "mtp_engine_run_test";
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
  for (int mode = 0; mode < 3; ++mode) {
    auto v = variant_;
    // 1: small enough to trigger, exercises the coefficient broadcast. 2: DP = 2 with the
    // distributed optimizer, 8 ranks.
    if (mode == 1) v.clip_grad = 0.05;
    if (mode == 2) {
      v.data_parallel_size = 2;
      v.optimizer = config::Optimizer::kDistributedAdam;
    }
    const std::string tag = std::to_string(mode);
    const std::string single = run(v, "single" + tag + ".h5");
    const int world = plan(v).world_size();
    auto tr = transport::make_in_process_transport(world, {});
    const std::string dist = (dir_ / ("dist" + tag + ".h5")).string();
    std::vector<std::thread> threads;
    std::vector<std::string> errors(world);
    for (int r = 0; r < world; ++r) {
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
    for (int r = 0; r < world; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
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

// Megatron's MegatronPretrainingSampler (megatron/training/datasets/data_samplers.py): samples are
// consumed in order, DP·b at a time, data-parallel rank d taking the d-th micro-batch-sized
// slice. So in step t, microbatch mb of rank d holds samples ((t−1)·M + mb)·DP·b + d·b + row,
// and the byte-level source gives sample j the window at (j·s) mod (size − s) (data/microbatch.h).
// Checked against the GPL-3 bytes read here, for the record's global order mb·DP + d.
TEST_F(RunTest, DataParallelRanksTakeMegatronSamplerSlicesOfTheGlobalBatch) {
  auto v = variant_;
  v.data_parallel_size = 2;
  record::RecordReader r(run(v, "sampler.h5"));
  std::ifstream in("/usr/share/common-licenses/GPL-3", std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const int64_t M = 4, DP = 2, b = 2, s = 8, span = static_cast<int64_t>(text.size()) - s;
  for (int step : {1, 2}) {
    auto tokens = r.read(step, "batch", "tokens");
    ASSERT_EQ(tokens.shape, (std::vector<int64_t>{DP * M, b, s}));
    const auto* got = reinterpret_cast<const int32_t*>(tokens.bytes.data());
    for (int64_t mb = 0; mb < M; ++mb) {
      for (int64_t d = 0; d < DP; ++d) {
        for (int64_t row = 0; row < b; ++row) {
          const int64_t sample = ((step - 1) * M + mb) * DP * b + d * b + row;
          const int64_t start = (sample * s) % span;
          for (int64_t i = 0; i < s; ++i) {
            ASSERT_EQ(got[((mb * DP + d) * b + row) * s + i],
                      static_cast<unsigned char>(text[start + i]))
                << "step " << step << " mb " << mb << " rank " << d << " row " << row;
          }
        }
      }
    }
  }
}

// A data-parallel replica whose weight drifts (one element, one rank, one step) stops the run
// with the step, the tensor and both copies named; so does a word-embedding copy that drifts.
TEST_F(RunTest, DriftOfAReplicaOrAnEmbeddingCopyIsReported) {
  struct Case {
    const char* tensor;
    int rank, stage;
    std::vector<std::string> expect;
  };
  // P = 4, DP = 2: rank = dp + 2·pp. Rank 3 is (pp 1, dp 1), holding stage 1 (layers 0-2);
  // rank 4 is (pp 2, dp 0), holding stage 6, the MTP stage with its embedding copy.
  const std::vector<Case> cases = {
      {"decoder.layers.1.mlp.linear_fc1.weight",
       3,
       1,
       {"step 2: weight decoder.layers.1.mlp.linear_fc1.weight",
        "data-parallel rank 1, pipeline rank 1 (stage 1)",
        "recorded copy on data-parallel rank 0, pipeline rank 1 (stage 1)"}},
      {"embedding.word_embeddings.weight",
       4,
       6,
       {"step 2: weight embedding.word_embeddings.weight",
        "data-parallel rank 0, pipeline rank 2 (stage 6)",
        "recorded copy on data-parallel rank 0, pipeline rank 0 (stage 0)"}}};
  for (const auto& c : cases) {
    auto v = variant_;
    v.data_parallel_size = 2;
    RunOptions ro;
    ro.record_path = (dir_ / "drift.h5").string();
    std::filesystem::remove(ro.record_path);
    ro.after_optimizer_step = [&](int64_t step, int rank, const std::string& name, int stage,
                                  at::Tensor& w) {
      if (step == 2 && rank == c.rank && name == c.tensor && stage == c.stage) {
        w.view({-1})[5] += 1e-3;
      }
    };
    try {
      run_variant(plan(v), *candidate_, data::DataConfig{}, ro);
      ADD_FAILURE() << "no drift reported for " << c.tensor;
    } catch (const ReplicaDriftError& e) {
      for (const auto& needle : c.expect) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    }
    EXPECT_FALSE(std::filesystem::exists(ro.record_path)) << "a record of a drifted run";
  }
}

// The seam after gradient finalisation: a change made there is what the record holds as the
// step's main grad (the gathered, recorded grad is the finalised one), and the weight the
// optimizer makes from it moves with it; no hook, no change.
TEST_F(RunTest, AGradChangedAfterFinalizationIsTheRecordedGrad) {
  const std::string name = "decoder.layers.2.mlp.linear_fc2.weight";
  const record::RecordReader plain(run(variant_, "plain_grads.h5"));
  RunOptions ro;
  ro.record_path = (dir_ / "planted_grads.h5").string();
  std::filesystem::remove(ro.record_path);
  int calls = 0;
  ro.after_grad_finalization = [&](int64_t step, int, const std::string& n, int, at::Tensor& g) {
    ++calls;
    if (step == 2 && n == name) g.view({-1})[3] += 0.5f;
  };
  run_variant(plan(variant_), *candidate_, data::DataConfig{}, ro);
  const record::RecordReader planted(ro.record_path);
  EXPECT_GT(calls, 0);
  for (int step = 1; step <= 2; ++step) {
    const record::TensorData a = plain.read(step, record::Group::kGrad, name);
    const record::TensorData b = planted.read(step, record::Group::kGrad, name);
    std::vector<float> fa(a.numel()), fb(b.numel());
    std::memcpy(fa.data(), a.bytes.data(), a.bytes.size());
    std::memcpy(fb.data(), b.bytes.data(), b.bytes.size());
    for (size_t i = 0; i < fa.size(); ++i) {
      const float want = (step == 2 && i == 3) ? fa[i] + 0.5f : fa[i];
      EXPECT_EQ(fb[i], want) << "step " << step << " element " << i;
    }
  }
  EXPECT_EQ(plain.read(1, record::Group::kWeight, name).bytes,
            planted.read(1, record::Group::kWeight, name).bytes);
  EXPECT_NE(plain.read(2, record::Group::kWeight, name).bytes,
            planted.read(2, record::Group::kWeight, name).bytes);
}

// A weight that turns NaN after step 1's optimizer step (in every replica alike, so the run goes
// on): the record names it as its first non-finite value, in full and digest-only records alike,
// and the NaN reaches step 2's losses.
TEST_F(RunTest, ARunThatTurnsNaNRecordsItsFirstNonFiniteValue) {
  for (auto mode : {config::RecordMode::kFull, config::RecordMode::kDigest}) {
    auto v = variant_;
    v.record = mode;
    RunOptions ro;
    ro.record_path = (dir_ / "nan.h5").string();
    std::filesystem::remove(ro.record_path);
    ro.after_optimizer_step = [](int64_t step, int, const std::string& name, int, at::Tensor& w) {
      if (step == 1 && name == "decoder.layers.2.mlp.linear_fc2.weight") w.view({-1})[7] = NAN;
    };
    run_variant(plan(v), *candidate_, data::DataConfig{}, ro);
    const record::RecordReader r(ro.record_path);
    const auto nf = r.first_nonfinite();
    ASSERT_TRUE(nf.has_value()) << config::enum_name(mode);
    EXPECT_EQ(nf->step, 1);
    EXPECT_EQ(nf->group, "weight");
    EXPECT_EQ(nf->name, "decoder.layers.2.mlp.linear_fc2.weight");
    EXPECT_EQ(nf->first.first_index, 7);
    EXPECT_EQ(nf->first.count, 1);
    EXPECT_GT(nf->tensors, 2) << "step 2's losses and grads are NaN too";
    float loss;
    std::memcpy(&loss, r.read(2, "loss", "total").bytes.data(), 4);
    EXPECT_TRUE(std::isnan(loss));
  }
  // A finite run's record has no such attribute.
  const record::RecordReader ok(run(variant_, "finite.h5"));
  EXPECT_FALSE(ok.first_nonfinite().has_value());
}

// untie_embeddings = false in every kind of legal layout, reference and candidate, with DP = 2:
// the runs complete, i.e. after every step every embedding copy on every replica holds the
// recorded copy's bits (the engine's replica check), in both copy-update modes.
TEST_F(RunTest, TiedEmbeddingsRunInEveryLayoutWithDataParallelism) {
  struct Layout {
    config::Implementation impl;
    const char* text;
    int pp;
  };
  const std::vector<Layout> layouts = {
      {config::Implementation::kReference, "Et*8mmL", 1},
      {config::Implementation::kReference, "Et*4|t*4mmL", 2},
      {config::Implementation::kReference, "E|t*3|(t|)*5mmL", 4},
      {config::Implementation::kCandidate, "Et*4|t*4mmL", 2},
      {config::Implementation::kCandidate, "Et*3|t*3|t*2mm|L", 4},
      {config::Implementation::kCandidate, "E|t*3|(t|)*4tmm|L", 4},
      {config::Implementation::kCandidate, "E|t*3|(t|)*3tt|mm|L", 4}};
  training_.steps = 2;
  auto reference = reference::make_reference();
  for (const auto& l : layouts) {
    for (auto update :
         {config::EmbeddingCopyUpdate::kReplicated, config::EmbeddingCopyUpdate::kBroadcast}) {
      config::VariantSpec v;
      v.name = "tied";
      v.implementation = l.impl;
      v.layout = l.text;
      v.pipeline_size = l.pp;
      v.data_parallel_size = 2;
      v.untie_embeddings = false;
      v.embedding_copy_update = update;
      const Implementation& impl =
          l.impl == config::Implementation::kReference ? *reference : *candidate_;
      RunOptions ro;
      ro.record_path = (dir_ / "tied.h5").string();
      EXPECT_NO_THROW(
          run_variant(plan_variant(tiny(), training_, v, impl), impl, data::DataConfig{}, ro))
          << l.text;
      record::RecordReader r(ro.record_path);
      EXPECT_EQ(r.names(1, "grad").back(), "mtp.layers.1.final_layernorm.weight") << l.text;
    }
  }
}

// bf16 (Megatron --bf16): the record holds fp32 main grads, fp32 master weights ("weight") and the
// bf16 parameters ("model_weight") re-cast from the masters; a main grad is the fp32 sum of the
// microbatches' bf16 gradients, added after each backward pass (Megatron's DDP hook), not a bf16
// accumulation. Checked at P = 1 against gradients computed here, microbatch by microbatch.
TEST_F(RunTest, Bf16MainGradsAreFp32SumsOfPerMicrobatchBf16Grads) {
  training_.dtype = config::DType::kBFloat16;
  training_.steps = 1;
  training_.num_microbatches = 2;
  config::VariantSpec v;
  v.name = "bf16";
  v.implementation = config::Implementation::kReference;
  v.layout = "Et*8mmL";
  auto reference = reference::make_reference();
  const RunPlan p = plan_variant(tiny(), training_, v, *reference);
  RunOptions ro;
  ro.record_path = (dir_ / "bf16.h5").string();
  run_variant(p, *reference, data::DataConfig{}, ro);
  record::RecordReader r(ro.record_path);
  const std::string fc2 = "decoder.layers.3.mlp.linear_fc2.weight";
  EXPECT_EQ(r.read(1, "grad", fc2).dtype, record::DType::kF32);
  EXPECT_EQ(r.read(1, "weight", fc2).dtype, record::DType::kF32);
  EXPECT_EQ(r.read(1, "model_weight", fc2).dtype, record::DType::kBF16);
  EXPECT_EQ(r.read(1, "loss", "lm").dtype, record::DType::kF32);
  // model_weight = bf16(master), round to nearest.
  for (int step : {0, 1}) {
    for (const auto& name : r.names(step, "weight")) {
      auto master = r.read(step, "weight", name), model = r.read(step, "model_weight", name);
      at::Tensor m = at::from_blob(master.bytes.data(), {master.numel()}, at::kFloat);
      at::Tensor b = m.to(at::kBFloat16).contiguous();
      ASSERT_EQ(std::memcmp(b.data_ptr(), model.bytes.data(), model.bytes.size()), 0)
          << "step " << step << " " << name;
    }
  }
  // The main grad of fc2: fp32(g_0) + fp32(g_1), g_mb the bf16 gradient of microbatch mb.
  const InitialWeights init = make_initial_weights(p.model, training_.seed);
  auto chunks = reference->build_chunks(p.layout, p.model, init, at::kBFloat16);
  auto source = data::open_token_source(data::DataConfig{});
  data::MicrobatchBuilder builder(*source, data::DataConfig{}, 2, 8, 256);
  at::Tensor sum_fp32, sum_bf16;
  for (int64_t mb = 0; mb < 2; ++mb) {
    const data::Microbatch m = builder.build(1, mb, 2);
    auto ints = [](const std::vector<int32_t>& v) {
      return at::tensor(std::vector<int64_t>(v.begin(), v.end())).view({2, 8});
    };
    MicrobatchTensors t;
    t.tokens = ints(m.tokens);
    t.labels = ints(m.labels);
    t.loss_mask =
        at::tensor(std::vector<float>(m.loss_mask.begin(), m.loss_mask.end())).view({2, 8});
    t.num_microbatches = 2;
    auto out = chunks[0]->forward({}, t);
    out.objective.backward();
    const at::Tensor& w = chunks[0]->params().get(fc2);
    at::Tensor g = w.grad().clone();
    w.mutable_grad().reset();
    for (const auto& [n, pt] : chunks[0]->params().entries()) pt.mutable_grad().reset();
    sum_fp32 = mb == 0 ? g.to(at::kFloat) : sum_fp32 + g.to(at::kFloat);
    sum_bf16 = mb == 0 ? g : sum_bf16 + g;
  }
  auto recorded = r.read(1, "grad", fc2);
  ASSERT_EQ(
      std::memcmp(sum_fp32.contiguous().data_ptr(), recorded.bytes.data(), recorded.bytes.size()),
      0)
      << "the main grad is not the fp32 sum of the microbatches' bf16 gradients";
  EXPECT_FALSE(at::equal(sum_bf16.to(at::kFloat), sum_fp32))
      << "bf16 accumulation would give the same bits: the test would not tell them apart";
}

}  // namespace
}  // namespace mtp::engine
