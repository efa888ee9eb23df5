// Tests of the executor's compute hooks (ExecutionOptions::before_compute / after_compute, used
// by `mtp-harness calibrate --validate` to time every op): on every rank they bracket each op of
// schedule::rank_ops exactly once, in order, never nested, with a combined 1F1B steady pair as
// one block; and they change nothing a step computes. And the combined 1F1B step's node order:
// the k-th layer of the forward microbatch interleaves with the k-th-from-last layer of the
// backward one (Megatron TransformerModelChunkSchedulePlan.run), also when every chunk holds
// one layer beside its pre- and post-processing.
#include "harness/engine/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "harness/config/testing/tiny_model.h"
#include "harness/engine/plan.h"
#include "harness/engine/testing/random_microbatches.h"
#include "reference/reference.h"

namespace mtp::engine {
namespace {

/// What one rank's hooks saw: (true = before, false = after, the block).
using Seen = std::vector<std::pair<bool, ComputeBlock>>;

/// One node of a combined step: (forward side, kind, layer).
struct NodeRun {
  bool forward;
  model::NodeKind kind;
  int layer;
};

struct Step {
  StepLosses losses;
  std::vector<Seen> seen;  ///< per pipeline rank
  /// Per pipeline rank, per combined step (a paired block), the nodes in the order they ran.
  std::vector<std::vector<std::vector<NodeRun>>> combined;
};

thread_local int t_rank = -1;  // the pipeline rank of the thread, set by before_compute

/// One step of the tiny model on P = 2, V = 2 under `kind` (D = 1), with or without hooks.
Step run_step(schedule::ScheduleKind kind, bool hooks) {
  config::ModelConfig cfg = config::testing::tiny_model();
  cfg.mtp_num_layers = 1;
  config::TrainingConfig training;
  training.num_microbatches = 6;
  config::VariantSpec variant;
  variant.name = "hooks";
  variant.pipeline_size = 2;
  variant.virtual_size = 2;
  variant.schedule = kind;
  auto impl = reference::make_reference();
  const RunPlan plan = plan_variant(cfg, training, variant, *impl);
  auto chunks = impl->build_chunks(plan.layout, plan.model, make_initial_weights(plan.model, 7),
                                   at::kFloat, at::Device(at::kCPU));
  const std::vector<MicrobatchTensors> mbs =
      testing::random_microbatches(cfg, training.num_microbatches, 100);
  auto transport = transport::make_in_process_transport(2, {});
  Step out;
  out.seen.resize(2);
  out.combined.resize(2);
  std::mutex mu;
  ExecutionOptions exec;
  if (hooks) {
    exec.before_compute = [&](const ComputeBlock& b) {
      std::lock_guard<std::mutex> lock(mu);
      out.seen[b.pipeline_rank].emplace_back(true, b);
      t_rank = b.pipeline_rank;
      if (b.paired_backward) out.combined[b.pipeline_rank].emplace_back();
    };
    exec.after_combined_node = [&](schedule::OpType side, model::NodeKind kind, int layer) {
      std::lock_guard<std::mutex> lock(mu);
      out.combined[t_rank].back().push_back({side == schedule::OpType::kForward, kind, layer});
    };
    exec.after_compute = [&](const ComputeBlock& b) {
      std::lock_guard<std::mutex> lock(mu);
      out.seen[b.pipeline_rank].emplace_back(false, b);
    };
  }
  out.losses = run_pipeline_step(chunks, plan.layout, plan.schedule, mbs, *transport, exec);
  // The schedule the step ran, for the expected blocks.
  EXPECT_EQ(plan.schedule.kind, kind);
  return out;
}

/// The blocks rank p must report: its rank_ops, a combined steady (F, B) pair as one block.
std::vector<ComputeBlock> expected_blocks(schedule::ScheduleKind kind, int p) {
  const schedule::ScheduleConfig sc{kind, 2, 2, 6, 0};
  const std::vector<schedule::Op> ops = schedule::rank_ops(sc, p);
  const bool combined = kind == schedule::ScheduleKind::kCombined1F1B;
  std::vector<ComputeBlock> out;
  for (size_t j = 0; j < ops.size(); ++j) {
    ComputeBlock b{p, ops[j], std::nullopt};
    if (combined && ops[j].phase == schedule::Phase::kSteady &&
        ops[j].type == schedule::OpType::kForward && j + 1 < ops.size() &&
        ops[j + 1].type == schedule::OpType::kBackward) {
      b.paired_backward = ops[++j];
    }
    out.push_back(b);
  }
  return out;
}

void expect_bracketed(schedule::ScheduleKind kind) {
  const Step s = run_step(kind, /*hooks=*/true);
  int pairs = 0;
  for (int p = 0; p < 2; ++p) {
    SCOPED_TRACE("pipeline rank " + std::to_string(p));
    const auto want = expected_blocks(kind, p);
    ASSERT_EQ(s.seen[p].size(), 2 * want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      for (int side = 0; side < 2; ++side) {
        const auto& [before, got] = s.seen[p][2 * i + side];
        EXPECT_EQ(before, side == 0) << "block " << i << ": hooks nested or out of order";
        EXPECT_EQ(got.pipeline_rank, p);
        EXPECT_TRUE(got.op == want[i].op) << "block " << i;
        EXPECT_EQ(got.paired_backward.has_value(), want[i].paired_backward.has_value());
        if (got.paired_backward && want[i].paired_backward) {
          EXPECT_TRUE(*got.paired_backward == *want[i].paired_backward) << "block " << i;
          pairs += side == 0;
        }
      }
    }
  }
  if (kind == schedule::ScheduleKind::kCombined1F1B) {
    EXPECT_GT(pairs, 0);
  }
}

TEST(ExecutorComputeHooksTest, BracketEveryInterleavedOpOnceInOrder) {
  expect_bracketed(schedule::ScheduleKind::kInterleaved);
}

TEST(ExecutorComputeHooksTest, BracketACombined1F1BPairAsOneBlock) {
  expect_bracketed(schedule::ScheduleKind::kCombined1F1B);
}

TEST(ExecutorCombinedStepTest, PairsTheKthForwardLayerWithTheKthLayerFromTheBackwardsEnd) {
  const Step s = run_step(schedule::ScheduleKind::kCombined1F1B, true);
  int interleaved = 0;
  for (int p = 0; p < 2; ++p) {
    ASSERT_FALSE(s.combined[p].empty()) << "rank " << p << " ran no combined step";
    for (const auto& nodes : s.combined[p]) {
      // Each side's layers in the order they ran.
      std::vector<int> f_layers, b_layers;
      for (const NodeRun& n : nodes) {
        auto& l = n.forward ? f_layers : b_layers;
        if (n.layer >= 0 && (l.empty() || l.back() != n.layer)) l.push_back(n.layer);
      }
      for (size_t k = 0; k < std::min(f_layers.size(), b_layers.size()); ++k) {
        // Between F's first and last node of its k-th layer runs a node of B's k-th layer.
        size_t first = nodes.size(), last = 0;
        for (size_t i = 0; i < nodes.size(); ++i) {
          if (nodes[i].forward && nodes[i].layer == f_layers[k]) {
            first = std::min(first, i);
            last = i;
          }
        }
        bool met = false;
        for (size_t i = first; i < last; ++i) {
          met = met || (!nodes[i].forward && nodes[i].layer == b_layers[k]);
        }
        EXPECT_TRUE(met) << "rank " << p << ": forward layer " << f_layers[k]
                         << " ran without backward layer " << b_layers[k] << " between its nodes";
        interleaved += met;
      }
    }
  }
  EXPECT_GT(interleaved, 0);
}

TEST(ExecutorComputeHooksTest, ChangeNoLoss) {
  for (auto kind : {schedule::ScheduleKind::kInterleaved, schedule::ScheduleKind::kCombined1F1B}) {
    const Step with = run_step(kind, true);
    const Step without = run_step(kind, false);
    ASSERT_EQ(with.losses.lm.size(), 6u);
    EXPECT_EQ(with.losses.lm, without.losses.lm);
    EXPECT_EQ(with.losses.mtp, without.losses.mtp);
  }
}

}  // namespace
}  // namespace mtp::engine
