// File: harness/schedule/schedule_property_test.cc
//
// Properties of every schedule over a grid of (P, V, M, N): each (chunk, mb) runs once forward
// and once backward per rank, FIFO per chunk, backward after its forward, the warm-up / steady /
// cool-down shape, and deadlock freedom of the whole pipeline (pipeline_sim.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "harness/schedule/pipeline_sim.h"
#include "harness/schedule/schedule.h"

namespace mtp::schedule {
namespace {

using testing::simulate_pipeline;

std::string describe(const ScheduleConfig& c) {
  return fmt::format("{} P={} V={} M={} N={}", schedule_kind_name(c.kind), c.pipeline_size,
                     c.virtual_size, c.num_microbatches, c.microbatch_group_size);
}

bool legal(const ScheduleConfig& config) {
  try {
    validate(config);
    return true;
  } catch (const ScheduleError&) {
    return false;
  }
}

// The grid of the brief, P ∈ {2,4,8}, V ∈ {1,2,4}, M ∈ {8,16}, widened with P = 3 and V = 3;
// N runs from P to M wherever legal (this covers N ∈ {P, P+1} and every legal remainder group).
// V = 1 runs both 1F1B and interleaved; P = 1 adds no-pipelining.
std::vector<ScheduleConfig> grid() {
  std::vector<ScheduleConfig> configs;
  for (int m : {8, 16}) {
    configs.push_back(ScheduleConfig{ScheduleKind::kNoPipelining, 1, 1, m, 0});
    configs.push_back(ScheduleConfig{ScheduleKind::kCombined1F1B, 1, 1, m, 0});
    for (int p : {2, 3, 4, 8}) {
      configs.push_back(ScheduleConfig{ScheduleKind::kOneFOneB, p, 1, m, 0});
      for (int v : {1, 2, 3, 4}) {
        for (int n = p; n <= m; ++n) {
          ScheduleConfig c{ScheduleKind::kInterleaved, p, v, m, n};
          if (legal(c)) {
            configs.push_back(c);
            c.kind = ScheduleKind::kCombined1F1B;
            configs.push_back(c);
          }
        }
      }
    }
  }
  return configs;
}

TEST(SchedulePropertyTest, GridCoversTheBriefsCases) {
  const auto configs = grid();
  int interleaved_np1 = 0;
  for (const auto& c : configs) {
    if (c.kind == ScheduleKind::kInterleaved && c.microbatch_group_size == c.pipeline_size + 1) {
      ++interleaved_np1;
    }
  }
  EXPECT_GT(interleaved_np1, 0);  // e.g. P2 M8 N3 (remainder 2)
  EXPECT_GT(configs.size(), 50u);
}

TEST(SchedulePropertyTest, EachOpOnceFifoAndBackwardAfterForward) {
  for (const ScheduleConfig& config : grid()) {
    const int p = config.pipeline_size;
    const int v = config.virtual_size;
    const int m = config.num_microbatches;
    for (int rank = 0; rank < p; ++rank) {
      SCOPED_TRACE(fmt::format("{} rank {}", describe(config), rank));
      const auto ops = rank_ops(config, rank);
      ASSERT_EQ(ops.size(), static_cast<size_t>(2 * m * v));
      std::map<std::pair<int, int>, int> fwd_pos, bwd_pos;  // (chunk, mb) → index in ops
      std::vector<int> next_fwd(v, 0), next_bwd(v, 0);      // FIFO: next expected mb per chunk
      for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
        const Op& op = ops[i];
        ASSERT_GE(op.chunk, 0);
        ASSERT_LT(op.chunk, v);
        ASSERT_GE(op.microbatch, 0);
        ASSERT_LT(op.microbatch, m);
        const auto key = std::make_pair(op.chunk, op.microbatch);
        if (op.type == OpType::kForward) {
          ASSERT_TRUE(fwd_pos.emplace(key, i).second) << "duplicate forward at op " << i;
          ASSERT_EQ(op.microbatch, next_fwd[op.chunk]++) << "forward not FIFO at op " << i;
        } else {
          ASSERT_TRUE(bwd_pos.emplace(key, i).second) << "duplicate backward at op " << i;
          ASSERT_EQ(op.microbatch, next_bwd[op.chunk]++) << "backward not FIFO at op " << i;
          ASSERT_TRUE(fwd_pos.count(key)) << "backward before its forward at op " << i;
        }
      }
      EXPECT_EQ(fwd_pos.size(), static_cast<size_t>(m * v));
      EXPECT_EQ(bwd_pos.size(), static_cast<size_t>(m * v));
    }
  }
}

// Warm-up forwards, then alternating steady F/B pairs, then cool-down backwards; the warm-up and
// cool-down lengths equal warmup_steps() (no pipelining: all steady pairs).
TEST(SchedulePropertyTest, PhaseShapeMatchesWarmupSteps) {
  for (const ScheduleConfig& config : grid()) {
    const int total = config.num_microbatches * config.virtual_size;
    for (int rank = 0; rank < config.pipeline_size; ++rank) {
      SCOPED_TRACE(fmt::format("{} rank {}", describe(config), rank));
      const auto ops = rank_ops(config, rank);
      const int w = warmup_steps(config, rank);
      ASSERT_GE(w, 0);
      ASSERT_LE(w, total);
      for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
        const Op& op = ops[i];
        if (i < w) {
          EXPECT_EQ(op.phase, Phase::kWarmup) << i;
          EXPECT_EQ(op.type, OpType::kForward) << i;
        } else if (i < w + 2 * (total - w)) {
          EXPECT_EQ(op.phase, Phase::kSteady) << i;
          EXPECT_EQ(op.type, (i - w) % 2 == 0 ? OpType::kForward : OpType::kBackward) << i;
        } else {
          EXPECT_EQ(op.phase, Phase::kCooldown) << i;
          EXPECT_EQ(op.type, OpType::kBackward) << i;
        }
      }
    }
  }
}

TEST(SchedulePropertyTest, WholePipelineRunsWithoutDeadlock) {
  for (const ScheduleConfig& config : grid()) {
    SCOPED_TRACE(describe(config));
    std::vector<std::vector<Op>> ops_per_rank;
    for (int rank = 0; rank < config.pipeline_size; ++rank) {
      ops_per_rank.push_back(rank_ops(config, rank));
    }
    const auto result = simulate_pipeline(ops_per_rank, config.virtual_size);
    EXPECT_TRUE(result.finished) << result.blocked;
  }
}

// The simulator must be able to fail: rank 0 runs no-pipelining order (B0.0 right after F0.0),
// which waits on rank 1's B0.0; rank 1 needs F0.1 from rank 0 first.
TEST(PipelineSimTest, DetectsDeadlock) {
  const auto f = [](int mb) { return Op{OpType::kForward, 0, mb, Phase::kSteady}; };
  const auto b = [](int mb) { return Op{OpType::kBackward, 0, mb, Phase::kSteady}; };
  const auto result = simulate_pipeline({{f(0), b(0), f(1), b(1)}, {f(0), f(1), b(0), b(1)}}, 1);
  EXPECT_FALSE(result.finished);
  EXPECT_EQ(result.executed, (std::vector<int>{1, 1}));
  EXPECT_EQ(result.blocked, "rank 0 blocked at op 1 (B0.0); rank 1 blocked at op 1 (F0.1); ");
}

// Backward before the rank's own forward of that (chunk, mb) blocks, and a cross-chunk ring
// dependency (rank P−1 chunk 0 → rank 0 chunk 1) is honoured.
TEST(PipelineSimTest, HonoursOwnForwardAndRing) {
  const auto f = [](int c, int mb) { return Op{OpType::kForward, c, mb, Phase::kWarmup}; };
  const auto b = [](int c, int mb) { return Op{OpType::kBackward, c, mb, Phase::kCooldown}; };
  EXPECT_FALSE(simulate_pipeline({{b(0, 0), f(0, 0)}}, 1).finished);
  // P=2 V=2, M=1: stages 0 (r0 c0), 1 (r1 c0), 2 (r0 c1), 3 (r1 c1).
  const auto ok = simulate_pipeline(
      {{f(0, 0), f(1, 0), b(1, 0), b(0, 0)}, {f(0, 0), f(1, 0), b(1, 0), b(0, 0)}}, 2);
  EXPECT_TRUE(ok.finished) << ok.blocked;
  // Both ranks start with chunk 1's forward: rank 0's needs rank 1's chunk 0 (stage 1), rank 1's
  // needs rank 0's chunk 1 (stage 2), and neither ran its chunk 0 yet.
  const auto bad = simulate_pipeline(
      {{f(1, 0), f(0, 0), b(1, 0), b(0, 0)}, {f(1, 0), f(0, 0), b(1, 0), b(0, 0)}}, 2);
  EXPECT_FALSE(bad.finished);
}

}  // namespace
}  // namespace mtp::schedule
