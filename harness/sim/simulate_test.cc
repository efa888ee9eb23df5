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

#include "harness/sim/activation.h"
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
  heavy[3].forward_ms = 2.0;
  heavy[3].backward_ms = 4.0;
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
          for (int i = 0; i < P * V; ++i) {
            StageCost c;
            c.forward_ms = 1.0 + 0.25 * (i % 3);
            c.backward_ms = 2.0 + 0.5 * (i % 2);
            st.push_back(c);
          }
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

/// Four decoder layers (0 dense, 1–3 MoE with 4 experts), D = 1, h 8, b 1, sequence `s`.
config::ModelConfig four_layer_moe(int64_t s) {
  config::ModelConfig m;
  m.num_layers = 4;
  m.mtp_num_layers = 1;
  m.hidden_size = 8;
  m.seq_length = s;
  m.micro_batch_size = 1;
  m.num_moe_experts = 4;
  m.moe_layer_freq = {0, 1, 1, 1};
  return m;
}

/// Hand-made prices of every node four_layer_moe uses (no chunk op), exact in binary.
CostTable four_layer_moe_costs() {
  CostTable costs;
  costs.nodes = {{CostNode::kEmbedding, {0.5, 0.25}},
                 {CostNode::kDecoderDense, {1, 2}},
                 {CostNode::kDecoderMoe, {3, 6}},
                 {CostNode::kMtpBlockMoe, {4, 8}},
                 {CostNode::kFinalLayernorm, {0.125, 0.25}},
                 {CostNode::kOutputHead, {2, 3}},
                 {CostNode::kMtpHead, {2.5, 3.5}}};
  return costs;
}

// Stage prices from the layout: what each stage holds, the MTP hidden states carried to the loss
// stage, and the timeline names what ran.
TEST(SimulateTest, StageCostsFollowTheLayoutAndTheTimelineShowsIt) {
  config::ModelConfig m = four_layer_moe(4);
  CostTable costs = four_layer_moe_costs();
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

// Context and expert parallelism priced by hand. s = 8, b = 1, h = 8, ng = 4, hn = 2, E = 4,
// topk 2, bf16; a link of 1 µs and 1 GB/s (1 byte = 1e-6 ms). CP = 2: K (s·b·ng·hn·2 = 128
// bytes) all-gathered as one message of 64 bytes: 0.001064 ms, K and V: 0.002128 per attention
// layer each way. EP = 2: a rank's 4 tokens · 2 · 8 · 2 = 128 bytes, half to the other member:
// 0.001064 per all-to-all, dispatch + combine 0.002128 each way; the counts (E int64 each,
// 64 bytes gathered) 0.001032 forward. Node times are halved by CP; the chunk op is not.
TEST(SimulateTest, StageCostsUnderContextAndExpertParallelism) {
  config::ModelConfig m = four_layer_moe(8);
  m.num_attention_heads = 4;
  m.num_query_groups = 4;
  m.moe_router_topk = 2;
  CostTable costs = four_layer_moe_costs();
  costs.nodes[CostNode::kChunkOp] = {0.0625, 0.375};
  costs.link.latency_us = 1.0;
  costs.link.bandwidth_gb_per_s = 1.0;
  const auto lay = layout::build_layout("Et*2|t*2|m|L", 4, 4, 1, layout::MtpRule::kOneStage);
  Parallelism par;
  par.cp = 2;
  par.ep = 2;
  const auto s = stage_costs(m, lay, costs, 2, par);
  ASSERT_EQ(s.size(), 4u);
  const double kv = 0.002128, a2a = 0.002128, counts = 0.001032;
  // Stage 0: E, dense t0, MoE t1.
  EXPECT_NEAR(s[0].forward_ms, 0.0625 + (0.5 + 1 + 3) / 2 + 2 * kv + a2a + counts, 1e-15);
  EXPECT_NEAR(s[0].backward_ms, 0.375 + (0.25 + 2 + 6) / 2 + 2 * kv + a2a, 1e-15);
  EXPECT_NEAR(s[0].forward_collective_ms, 2 * kv + a2a + counts, 1e-15);
  EXPECT_NEAR(s[0].backward_collective_ms, 2 * kv + a2a, 1e-15);
  EXPECT_NEAR(s[0].forward_a2a_ms, a2a, 1e-15);
  // Stage 2: the MTP block, MoE; stage 3: heads only, no collective.
  EXPECT_NEAR(s[2].backward_ms, 0.375 + 8.0 / 2 + kv + a2a, 1e-15);
  EXPECT_NEAR(s[3].forward_ms, 0.0625 + (2 + 2.5) / 2, 1e-15);
  EXPECT_EQ(s[3].forward_collective_ms, 0.0);
  // Messages carry the rank's s / CP tokens: 4·1·8·2 bytes per hidden state.
  EXPECT_EQ(s[1].message_bytes, 64u);
  EXPECT_EQ(s[2].message_bytes, 128u);  // cat(h0, h1)
  // A collective link of its own: 10 µs each message instead of 1. Stage 0's forward sends 7:
  // K and V of two layers, dispatch and combine, the counts.
  Link slow = costs.link;
  slow.latency_us = 10.0;
  par.collective_link = slow;
  const auto t = stage_costs(m, lay, costs, 2, par);
  EXPECT_NEAR(t[0].forward_collective_ms - s[0].forward_collective_ms, 7 * 0.009, 1e-15);
  // cp = ep = 1: the measured times whole, nothing added (sums exact in binary).
  const auto one = stage_costs(m, lay, costs, 2, Parallelism{});
  EXPECT_EQ(one[0].forward_ms, 0.0625 + 0.5 + 1 + 3);
  EXPECT_EQ(one[2].backward_ms, 0.375 + 8);
  EXPECT_EQ(one[1].message_bytes, 8u * 8 * 2);
  for (const StageCost& c : one) EXPECT_EQ(c.forward_collective_ms + c.backward_a2a_ms, 0.0);
}

// Activations of a CP rank, closed form: h 8, F 128, a 4, s 8, b 1, bf16, unfused attention.
// cp = 1: (13·8 + 3·128)·8·2 = 7808 plus scores 2·4·8·8·4 = 2048. cp = 2: (488)·4·2 = 3904,
// scores of its 4 queries against 8 keys 2·4·4·8·4 = 1024, the gathered K and V 2·8·4·2·2 = 256.
TEST(SimulateTest, ActivationsOfAContextParallelRank) {
  config::ModelConfig m;
  m.hidden_size = 8;
  m.ffn_hidden_size = 128;
  m.num_attention_heads = 4;
  m.num_query_groups = 4;
  m.seq_length = 8;
  m.micro_batch_size = 1;
  EXPECT_EQ(layer_activation_bytes(m, false, false, 2), 7808u + 2048u);
  EXPECT_EQ(layer_activation_bytes(m, false, false, 2, 2), 3904u + 1024u + 256u);
  // A head: s_l·b·V·(2 + 8) + 2·s_l·b·h·2 with V = 256.
  EXPECT_EQ(head_activation_bytes(m, 2, 2), 4u * 256 * 10 + 2u * 4 * 8 * 2);
}

// What does not split is refused by name: s = 8 over 2·3 chunks, E = 4 over 3 ranks, a dense
// model over EP, sizes below 1.
TEST(SimulateTest, ParallelSizesThatDoNotFitAreRefused) {
  config::ModelConfig m;
  m.num_layers = 2;
  m.seq_length = 8;
  m.hidden_size = 8;
  m.micro_batch_size = 1;
  CostTable costs;
  costs.nodes = {{CostNode::kEmbedding, {1, 1}},
                 {CostNode::kDecoderDense, {1, 1}},
                 {CostNode::kDecoderMoe, {1, 1}},
                 {CostNode::kFinalLayernorm, {1, 1}},
                 {CostNode::kOutputHead, {1, 1}}};
  const auto lay = make_layout("Et|tL", 2, 2);
  auto refused = [&](int cp, int ep, const std::string& what) {
    Parallelism par;
    par.cp = cp;
    par.ep = ep;
    try {
      stage_costs(m, lay, costs, 2, par);
      ADD_FAILURE() << "cp " << cp << " ep " << ep << " accepted";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(what));
    }
  };
  refused(1, 2, "ep = 2 needs an MoE model");
  refused(3, 1, "cp = 3 needs seq_length to be a multiple of 2 · cp = 6 (this model: 8)");
  refused(0, 1, "cp = 0, ep = 1: each must be >= 1");
  m.num_moe_experts = 4;
  m.moe_layer_freq = {0, 0};
  refused(1, 2, "needs at least one MoE layer");
  m.moe_layer_freq = {0, 1};
  refused(1, 3, "ep = 3 needs num_moe_experts (4) to be a multiple of ep");
  Parallelism ok;
  ok.cp = 4;
  ok.ep = 4;
  EXPECT_NO_THROW(stage_costs(m, lay, costs, 2, ok));
}

// Combined 1F1B with all-to-alls: a steady pair lasts max(compute, all-to-all) of its forward and
// backward: F 1 ms (0.5 of it all-to-all) and B 2 ms (0.5): compute 2, all-to-all 1 → 2 ms
// instead of 3; with F's 0.75 and B's 1.5 the all-to-alls (2.25) outlast the compute (0.75).
// Every rank's busy time counts each block once, and the step shortens.
TEST(SimulateTest, CombinedPairsHideTheirAllToAlls) {
  const auto lay = make_layout("Et|tL", 2, 2);
  const auto cfg = config(ScheduleKind::kCombined1F1B, 2, 1, 6);
  const SimResult plain = simulate(lay, uniform(2, 1.0, 2.0), cfg, no_delay());
  for (auto [fa, ba, block] : {std::tuple{0.5, 0.5, 2.0}, std::tuple{0.75, 1.5, 2.25}}) {
    auto st = uniform(2, 1.0, 2.0);
    for (auto& c : st) {
      c.forward_a2a_ms = c.forward_collective_ms = fa;
      c.backward_a2a_ms = c.backward_collective_ms = ba;
    }
    const SimResult r = simulate(lay, st, cfg, no_delay());
    for (int p = 0; p < 2; ++p) {
      int pairs = 0, singles_f = 0, singles_b = 0;
      for (const SimOp& o : r.ops) {
        if (o.pipeline_rank != p) continue;
        if (o.combined) {
          EXPECT_DOUBLE_EQ(o.end_ms - o.start_ms, block);
          pairs += o.type == OpType::kForward;
        } else {
          (o.type == OpType::kForward ? singles_f : singles_b) += 1;
        }
      }
      EXPECT_GT(pairs, 0) << "rank " << p;
      EXPECT_DOUBLE_EQ(r.ranks[p].busy_ms, singles_f * 1.0 + singles_b * 2.0 + pairs * block);
      EXPECT_DOUBLE_EQ(r.ranks[p].idle_ms, r.step_ms - r.ranks[p].busy_ms);
    }
    EXPECT_LT(r.step_ms, plain.step_ms);
  }
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
  // A plan past kMaxSimulatedOps is refused before any op list is built: 4 stages · 2 ops ·
  // 2^21 microbatches is exactly the bound; one microbatch more is over it.
  m.seq_length = 32;
  const int at_bound = static_cast<int>(kMaxSimulatedOps / 8);
  EXPECT_NO_THROW(plan_simulation(m, "Et|t|t|tmmL", 2, at_bound, "", 0, false));
  try {
    plan_simulation(m, "Et|t|t|tmmL", 2, at_bound + 1, "", 0, false);
    ADD_FAILURE() << "a plan over the op bound";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("4 stages and M = 2097153 make 16777224 ops"));
  }
}

TEST(SimulateTest, MismatchedScheduleIsAnError) {
  const auto lay = make_layout("Et|tL", 2, 2);
  EXPECT_THROW(
      simulate(lay, uniform(2, 1, 2), config(ScheduleKind::kOneFOneB, 4, 1, 4), no_delay()),
      InputError);
}

}  // namespace
}  // namespace mtp::sim
