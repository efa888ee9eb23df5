// Tests of the pipeline cost simulator (simulate.h) against schedules timed by hand: a 2-stage
// and a 4-stage 1F1B step with and without link latency and with one heavy stage, and, for every
// schedule kind over P, V and M, the dependency rules the executor obeys (each rank runs
// schedule::rank_ops in order, one op at a time; a forward after the previous stage's forward, a
// backward after the next stage's backward and its own forward, each message delayed).

#include "harness/sim/simulate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "harness/sim/timeline_svg.h"

namespace mtp::sim {
namespace {

using schedule::OpType;
using schedule::ScheduleKind;

layout::PipelineLayout make_layout(const std::string& text, int P, int layers) {
  return layout::build_layout(text, P, layers, 0, layout::MtpRule::kOneStage);
}

std::vector<StageCost> uniform(int n, double f, double b) {
  std::vector<StageCost> s(static_cast<size_t>(n));
  for (auto& c : s) {
    c.forward_ms = f;
    c.backward_ms = b;
  }
  return s;
}

schedule::ScheduleConfig config(ScheduleKind kind, int P, int V, int M) {
  schedule::ScheduleConfig c;
  c.kind = kind;
  c.pipeline_size = P;
  c.virtual_size = V;
  c.num_microbatches = M;
  return c;
}

Link no_delay() {
  Link l;
  l.latency_us = 0.0;
  l.bandwidth_gb_per_s = 1.0;
  return l;
}

/// (start, end) of each op of `rank`, in its order.
std::vector<std::pair<double, double>> times(const SimResult& r, int rank) {
  std::vector<std::pair<double, double>> out;
  for (const SimOp& o : r.ops) {
    if (o.pipeline_rank == rank) out.emplace_back(o.start_ms, o.end_ms);
  }
  return out;
}

// P = 2, M = 3, F = 1 ms, B = 2 ms per stage, no delay. Rank 0: F0 [0,1] F1 [1,2] B0 [4,6]
// F2 [6,7] B1 [7,9] B2 [10,12]; rank 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] F2 [7,8] B2 [8,10].
TEST(SimulateTest, TwoStage1F1BMatchesTheHandTimedSchedule) {
  const auto lay = make_layout("Et|tL", 2, 2);
  const SimResult r =
      simulate(lay, uniform(2, 1.0, 2.0), config(ScheduleKind::kOneFOneB, 2, 1, 3), no_delay());
  EXPECT_DOUBLE_EQ(r.step_ms, 12.0);
  using T = std::vector<std::pair<double, double>>;
  EXPECT_EQ(times(r, 0), (T{{0, 1}, {1, 2}, {4, 6}, {6, 7}, {7, 9}, {10, 12}}));
  EXPECT_EQ(times(r, 1), (T{{1, 2}, {2, 4}, {4, 5}, {5, 7}, {7, 8}, {8, 10}}));
  EXPECT_DOUBLE_EQ(r.ranks[0].busy_ms, 9.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].idle_ms, 3.0);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.rank_imbalance, 1.0);
  EXPECT_EQ(r.ranks[0].peak_in_flight, 2);  // F0 F1 before B0
  EXPECT_EQ(r.ranks[1].peak_in_flight, 1);
}

// The same with a 0.5 ms message each way: rank 1's F0 [1.5,2.5] B0 [2.5,4.5]; rank 0's B0
// [5,7] … B2 [12,14].
TEST(SimulateTest, TwoStage1F1BWithLinkLatency) {
  const auto lay = make_layout("Et|tL", 2, 2);
  Link l = no_delay();
  l.latency_us = 500.0;
  const SimResult r =
      simulate(lay, uniform(2, 1.0, 2.0), config(ScheduleKind::kOneFOneB, 2, 1, 3), l);
  EXPECT_DOUBLE_EQ(r.step_ms, 14.0);
  using T = std::vector<std::pair<double, double>>;
  EXPECT_EQ(times(r, 0), (T{{0, 1}, {1, 2}, {5, 7}, {7, 8}, {8, 10}, {12, 14}}));
  EXPECT_EQ(times(r, 1),
            (T{{1.5, 2.5}, {2.5, 4.5}, {4.5, 5.5}, {5.5, 7.5}, {8.5, 9.5}, {9.5, 11.5}}));
  // Bytes cost bandwidth: 1e6 bytes at 1 GB/s = 1 ms on top of the latency.
  EXPECT_DOUBLE_EQ(l.message_ms(1e6), 1.5);
}

// P = 4, M = 4, uniform F = 1, B = 2: (M + P − 1)·(F + B) = 21 ms. With the last stage twice as
// heavy (F 2, B 4): F0 reaches it at 3 ms, it then runs 4·6 ms back to back, and the last
// backward crosses three stages (6 ms): 33 ms; its rank works 24 of the mean 15 ms.
TEST(SimulateTest, FourStage1F1BUniformAndWithAHeavyLastStage) {
  const auto lay = make_layout("Et|t|t|tL", 4, 4);
  const auto cfg = config(ScheduleKind::kOneFOneB, 4, 1, 4);
  const SimResult even = simulate(lay, uniform(4, 1.0, 2.0), cfg, no_delay());
  EXPECT_DOUBLE_EQ(even.step_ms, 21.0);
  for (const RankTime& rt : even.ranks) EXPECT_DOUBLE_EQ(rt.idle_ms, 9.0);
  auto heavy = uniform(4, 1.0, 2.0);
  heavy[3] = {2.0, 4.0};
  const SimResult r = simulate(lay, heavy, cfg, no_delay());
  EXPECT_DOUBLE_EQ(r.step_ms, 33.0);
  using T = std::vector<std::pair<double, double>>;
  EXPECT_EQ(times(r, 3),
            (T{{3, 5}, {5, 9}, {9, 11}, {11, 15}, {15, 17}, {17, 21}, {21, 23}, {23, 27}}));
  EXPECT_EQ(times(r, 0),
            (T{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {13, 15}, {19, 21}, {25, 27}, {31, 33}}));
  EXPECT_DOUBLE_EQ(r.ranks[3].idle_ms, 9.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].idle_ms, 21.0);
  EXPECT_EQ(r.most_loaded_stage, 3);
  EXPECT_EQ(r.most_loaded_rank, 3);
  EXPECT_DOUBLE_EQ(r.rank_imbalance, 24.0 / 15.0);
}

// Every schedule kind, P 2..4, V 1..3, several M: each rank runs its rank_ops in order without
// overlap, and every op starts after its inputs (with the link's delay) — the rules the executor
// and the transport enforce. Combined 1F1B pairs share one block of F + B time.
TEST(SimulateTest, EveryScheduleObeysTheExecutorsDependencies) {
  Link l = no_delay();
  l.latency_us = 300.0;
  int checked = 0;
  for (ScheduleKind kind : schedule::all_schedule_kinds()) {
    for (int P = 1; P <= 4; ++P) {
      for (int V = 1; V <= 3; ++V) {
        for (int M : {1, 2, 4, 6, 8}) {
          auto cfg = config(kind, P, V, M);
          try {
            schedule::validate(cfg);
          } catch (const InputError&) {
            continue;  // not a valid configuration of this schedule
          }
          std::string text = "E";
          for (int i = 0; i < P * V; ++i) text += i == 0 ? "t" : "|t";
          text += "L";
          const auto lay = make_layout(text, P, P * V);
          std::vector<StageCost> st;
          for (int i = 0; i < P * V; ++i) st.push_back({1.0 + 0.25 * (i % 3), 2.0 + 0.5 * (i % 2)});
          const SimResult r = simulate(lay, st, cfg, l);
          std::map<std::tuple<int, int, int>, const SimOp*> by;  // (type, stage, mb)
          for (const SimOp& o : r.ops)
            by[std::make_tuple(static_cast<int>(o.type), o.stage, o.microbatch)] = &o;
          auto end_of = [&by](int type, int stage, int mb) {
            return by.at(std::make_tuple(type, stage, mb))->end_ms;
          };
          ASSERT_EQ(r.ops.size(), static_cast<size_t>(2 * P * V * M));
          for (int p = 0; p < P; ++p) {
            const auto ops = schedule::rank_ops(cfg, p);
            const auto t = times(r, p);
            ASSERT_EQ(t.size(), ops.size());
            size_t k = 0;
            for (const SimOp& o : r.ops) {
              if (o.pipeline_rank != p) continue;
              EXPECT_EQ(o.stage, ops[k].chunk * P + p);
              EXPECT_EQ(o.microbatch, ops[k].microbatch);
              EXPECT_EQ(o.type, ops[k].type);
              if (k > 0 && !(o.combined && ops[k].type == OpType::kBackward)) {
                EXPECT_GE(o.start_ms, t[k - 1].second - 1e-12);
              }
              const double d = P > 1 ? l.message_ms(0) : 0.0;
              if (o.type == OpType::kForward && o.stage > 0) {
                EXPECT_GE(o.start_ms + 1e-12, end_of(0, o.stage - 1, o.microbatch) + d);
              }
              if (o.type == OpType::kBackward) {
                EXPECT_GE(o.start_ms + 1e-12, end_of(0, o.stage, o.microbatch));
                if (o.stage < P * V - 1) {
                  EXPECT_GE(o.start_ms + 1e-12, end_of(1, o.stage + 1, o.microbatch) + d);
                }
              }
              ++k;
            }
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 30);
}

// Stage prices from the layout: what each stage holds, the MTP hidden states carried to the loss
// stage, and the timeline names what ran.
TEST(SimulateTest, StageCostsFollowTheLayoutAndTheTimelineShowsIt) {
  config::ModelConfig m;
  m.num_layers = 4;
  m.mtp_num_layers = 1;
  m.hidden_size = 8;
  m.seq_length = 4;
  m.micro_batch_size = 1;
  m.num_moe_experts = 4;
  m.moe_layer_freq = {0, 1, 1, 1};
  CostTable costs;
  costs.nodes = {{CostNode::kEmbedding, {0.5, 0.25}},
                 {CostNode::kDecoderDense, {1, 2}},
                 {CostNode::kDecoderMoe, {3, 6}},
                 {CostNode::kMtpBlockMoe, {4, 8}},
                 {CostNode::kFinalLayernorm, {0.125, 0.25}},
                 {CostNode::kOutputHead, {2, 3}},
                 {CostNode::kMtpHead, {2.5, 3.5}}};
  const auto lay = layout::build_layout("Et*2|t*2|m|L", 4, 4, 1, layout::MtpRule::kOneStage);
  const auto s = stage_costs(m, lay, costs, 2);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_DOUBLE_EQ(s[0].forward_ms, 0.5 + 1 + 3);    // E, dense t0, MoE t1
  EXPECT_DOUBLE_EQ(s[1].forward_ms, 3 + 3 + 0.125);  // two MoE layers and the final layernorm
  EXPECT_DOUBLE_EQ(s[2].forward_ms, 4);              // the MTP block (its layer is MoE)
  EXPECT_DOUBLE_EQ(s[3].forward_ms, 2 + 2.5);        // the LM head and the MTP head
  EXPECT_DOUBLE_EQ(s[3].backward_ms, 3 + 3.5);
  EXPECT_EQ(s[0].contents, "E t0 t1");
  EXPECT_EQ(s[2].contents, "m1");
  EXPECT_EQ(s[1].message_bytes, 4u * 8 * 2);      // h0
  EXPECT_EQ(s[2].message_bytes, 2u * 4 * 8 * 2);  // cat(h0, h1) to the loss stage
  EXPECT_TRUE(s[2].has_mtp);
  costs.nodes.erase(CostNode::kMtpHead);
  EXPECT_THROW(stage_costs(m, lay, costs, 2), InputError);
  const SimResult r = simulate(lay, s, config(ScheduleKind::kOneFOneB, 4, 1, 4), no_delay());
  const std::string svg = timeline_svg(r, s, "P4");
  EXPECT_THAT(svg, ::testing::HasSubstr("<svg"));
  EXPECT_THAT(svg, ::testing::HasSubstr("F stage 2 (m1) microbatch 3"));
  EXPECT_THAT(svg, ::testing::HasSubstr("#d9640b"));  // an MTP backward block
}

// A chunk op is paid once per op by every stage, an empty one too; a table without it prices 0.
TEST(SimulateTest, EveryStageCarriesOneChunkOp) {
  config::ModelConfig m;
  m.num_layers = 2;
  m.mtp_num_layers = 1;
  m.hidden_size = 8;
  m.seq_length = 4;
  m.micro_batch_size = 1;
  CostTable costs;
  costs.nodes = {{CostNode::kEmbedding, {0.5, 0.25}},  {CostNode::kDecoderDense, {1, 2}},
                 {CostNode::kMtpBlockDense, {4, 8}},   {CostNode::kFinalLayernorm, {0.125, 0.25}},
                 {CostNode::kOutputHead, {2, 3}},      {CostNode::kMtpHead, {2.5, 3.5}},
                 {CostNode::kChunkOp, {0.0625, 0.375}}};
  const auto lay = layout::build_layout("Et|t|||m|L", 3, 2, 1, layout::MtpRule::kOneStage);
  const auto s = stage_costs(m, lay, costs, 2);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_DOUBLE_EQ(s[2].forward_ms, 0.0625);  // the empty stage: its op only
  EXPECT_DOUBLE_EQ(s[2].backward_ms, 0.375);
  EXPECT_DOUBLE_EQ(s[0].forward_ms, 0.0625 + 0.5 + 1);
  EXPECT_DOUBLE_EQ(s[3].backward_ms, 0.375);            // the second empty stage
  EXPECT_DOUBLE_EQ(s[5].backward_ms, 0.375 + 3 + 3.5);  // the LM head and the MTP head
  costs.nodes.erase(CostNode::kChunkOp);
  const auto z = stage_costs(m, lay, costs, 2);
  EXPECT_DOUBLE_EQ(z[2].forward_ms, 0.0);
  EXPECT_DOUBLE_EQ(z[0].forward_ms, 0.5 + 1);
}

// What the executor refuses, the simulator refuses too: combined 1F1B with D > 1, D >= s.
TEST(SimulateTest, PlansFollowTheSchedulesRules) {
  config::ModelConfig m;
  m.num_layers = 4;
  m.mtp_num_layers = 2;
  m.seq_length = 32;
  EXPECT_NO_THROW(plan_simulation(m, "Et|t|t|tmmL", 2, 4, "", 0, false));
  try {
    plan_simulation(m, "Et|t|t|tmmL", 2, 4, "combined_1f1b", 0, false);
    ADD_FAILURE() << "combined 1F1B with D = 2";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("combined_1f1b supports mtp_num_layers <= 1; the "
                                               "model has 2"));
  }
  m.seq_length = 2;
  EXPECT_THROW(plan_simulation(m, "Et|t|t|tmmL", 2, 4, "", 0, false), InputError);
}

TEST(SimulateTest, MismatchedScheduleIsAnError) {
  const auto lay = make_layout("Et|tL", 2, 2);
  EXPECT_THROW(
      simulate(lay, uniform(2, 1, 2), config(ScheduleKind::kOneFOneB, 4, 1, 4), no_delay()),
      InputError);
}

}  // namespace
}  // namespace mtp::sim
