// The pipeline cost simulator's dependency logic against the executor (issue 23): for every
// schedule a scenario in scenarios/ runs — (kind, P, V, M, N) of each variant's plan — the
// executor runs one step of a small model with its pipeline ranks as threads, and the simulator
// (harness/sim/simulate.h) plays the same schedule.
//
// - Per pipeline rank, the executor's compute blocks complete in exactly the order of the
//   simulator's ops, a combined 1F1B pair as one block in both.
// - Across ranks the executor's interleaving depends on timing, so the order the two must share
//   is the partial order: every block the executor ran began after every op the simulator makes
//   it wait for had completed (global sequence numbers at each block's begin and end): a forward
//   after the previous stage's forward of its microbatch, a backward after its own forward and
//   the next stage's backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include "candidate/candidate.h"
#include "candidate/split/split.h"
#include "harness/config/testing/tiny_model.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/testing/random_microbatches.h"
#include "harness/scenario/scenario.h"
#include "harness/sim/simulate.h"
#include "reference/reference.h"

namespace mtp::engine {
namespace {

using schedule::OpType;

/// (kind, P, V, M, N): one schedule as the executor and the simulator take it.
using ScheduleKey = std::tuple<int, int, int, int, int>;

schedule::ScheduleConfig config_of(const ScheduleKey& k) {
  schedule::ScheduleConfig c;
  c.kind = static_cast<schedule::ScheduleKind>(std::get<0>(k));
  c.pipeline_size = std::get<1>(k);
  c.virtual_size = std::get<2>(k);
  c.num_microbatches = std::get<3>(k);
  c.microbatch_group_size = std::get<4>(k);
  return c;
}

/// Every schedule the variants of the CPU scenarios/*.toml plan (cwd: the source tree, as ctest
/// runs).
std::set<ScheduleKey> scenario_schedules(int* variants) {
  std::set<ScheduleKey> out;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator("scenarios")) {
    if (e.path().extension() == ".toml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const scenario::Scenario sc = scenario::load_scenario(f.string());
    // A CUDA scenario's plans need a CUDA build; its schedules are plain 1F1B / interleaved
    // ones the CPU scenarios run too.
    if (sc.training.device == config::Device::kCuda) continue;
    for (const config::VariantSpec& v : sc.variants) {
      const auto impl =
          v.implementation == config::Implementation::kCandidate ? candidate::make_candidate()
          : v.implementation == config::Implementation::kSplit   ? split::make_split()
                                                                 : reference::make_reference();
      const RunPlan plan = plan_variant(sc.model, sc.training, v, *impl);
      const schedule::ScheduleConfig& c = plan.schedule;
      out.insert({static_cast<int>(c.kind), c.pipeline_size, c.virtual_size, c.num_microbatches,
                  c.microbatch_group_size});
      ++*variants;
    }
  }
  return out;
}

/// One executed block: what it ran and its global begin and end sequence numbers.
struct Ran {
  ComputeBlock block;
  int64_t begin = 0;
  int64_t end = 0;
};

/// One step of a tiny model (one decoder layer per stage, D = 1) under `c`, ranks as threads.
std::vector<std::vector<Ran>> run_executor(const schedule::ScheduleConfig& c,
                                           layout::PipelineLayout* layout_out) {
  config::ModelConfig cfg = config::testing::tiny_model();
  cfg.num_layers = c.pipeline_size * c.virtual_size;
  cfg.mtp_num_layers = 1;
  config::TrainingConfig training;
  training.num_microbatches = c.num_microbatches;
  config::VariantSpec variant;
  variant.name = "order";
  variant.pipeline_size = c.pipeline_size;
  variant.virtual_size = c.virtual_size;
  variant.schedule = c.kind;
  variant.microbatch_group_size = c.microbatch_group_size;
  auto impl = reference::make_reference();
  const RunPlan plan = plan_variant(cfg, training, variant, *impl);
  EXPECT_TRUE(plan.schedule.kind == c.kind && plan.schedule.num_microbatches == c.num_microbatches)
      << "the tiny model's plan runs another schedule";
  *layout_out = plan.layout;
  auto chunks = impl->build_chunks(plan.layout, plan.model, make_initial_weights(plan.model, 7),
                                   at::kFloat, at::Device(at::kCPU));
  const std::vector<MicrobatchTensors> mbs =
      testing::random_microbatches(cfg, c.num_microbatches, 300);
  const int P = c.pipeline_size;
  auto transport = transport::make_in_process_transport(P, {});
  std::vector<std::vector<Ran>> ran(static_cast<size_t>(P));
  std::atomic<int64_t> clock{0};
  std::mutex mu;
  ExecutionOptions exec;
  exec.before_compute = [&](const ComputeBlock& b) {
    const int64_t t = clock++;
    std::lock_guard<std::mutex> lock(mu);
    ran[b.pipeline_rank].push_back({b, t, -1});
  };
  exec.after_compute = [&](const ComputeBlock& b) {
    const int64_t t = clock++;
    std::lock_guard<std::mutex> lock(mu);
    ran[b.pipeline_rank].back().end = t;
  };
  run_pipeline_step(chunks, plan.layout, plan.schedule, mbs, *transport, exec);
  return ran;
}

TEST(ExecutorSimulatorTest, EveryScenarioScheduleRunsInTheSimulatorsOrder) {
  int variants = 0;
  const std::set<ScheduleKey> schedules = scenario_schedules(&variants);
  ASSERT_GT(variants, 100);  // every scenario's variants were planned
  int pairs = 0;
  std::set<int> kinds;
  for (const ScheduleKey& key : schedules) {
    const schedule::ScheduleConfig c = config_of(key);
    SCOPED_TRACE(::testing::Message() << schedule::schedule_kind_name(c.kind) << " P "
                                      << c.pipeline_size << " V " << c.virtual_size << " M "
                                      << c.num_microbatches << " N " << c.microbatch_group_size);
    kinds.insert(std::get<0>(key));
    layout::PipelineLayout layout;
    const auto ran = run_executor(c, &layout);
    std::vector<sim::StageCost> stages(static_cast<size_t>(layout.num_stages()));
    for (size_t i = 0; i < stages.size(); ++i) {
      stages[i].forward_ms = 1.0 + 0.25 * static_cast<double>(i % 3);
      stages[i].backward_ms = 2.0;
    }
    sim::Link link;
    link.latency_us = 10.0;
    const sim::SimResult r = sim::simulate(layout, stages, c, link);
    const int P = c.pipeline_size;
    // (type, stage, microbatch) → the executor block's (begin, end).
    std::map<std::tuple<int, int, int>, std::pair<int64_t, int64_t>> when;
    for (int p = 0; p < P; ++p) {
      SCOPED_TRACE("pipeline rank " + std::to_string(p));
      std::vector<const sim::SimOp*> mine;
      for (const sim::SimOp& o : r.ops) {
        if (o.pipeline_rank == p) mine.push_back(&o);
      }
      size_t k = 0;
      for (const Ran& x : ran[p]) {
        ASSERT_LT(k, mine.size()) << "the executor ran more blocks than the simulator";
        ASSERT_GE(x.end, x.begin) << "a block without its end";
        const sim::SimOp& o = *mine[k];
        const schedule::Op& op = x.block.op;
        EXPECT_EQ(o.type, op.type) << "block " << k;
        EXPECT_EQ(o.stage, op.chunk * P + p) << "block " << k;
        EXPECT_EQ(o.microbatch, op.microbatch) << "block " << k;
        EXPECT_EQ(o.combined, x.block.paired_backward.has_value()) << "block " << k;
        when[{static_cast<int>(op.type), op.chunk * P + p, op.microbatch}] = {x.begin, x.end};
        ++k;
        if (x.block.paired_backward) {
          ++pairs;
          ASSERT_LT(k, mine.size());
          const schedule::Op& b = *x.block.paired_backward;
          EXPECT_TRUE(mine[k]->combined && mine[k]->type == OpType::kBackward &&
                      mine[k]->stage == b.chunk * P + p && mine[k]->microbatch == b.microbatch)
              << "the pair's backward, block " << k;
          when[{static_cast<int>(OpType::kBackward), b.chunk * P + p, b.microbatch}] = {x.begin,
                                                                                        x.end};
          ++k;
        }
      }
      EXPECT_EQ(k, mine.size()) << "the simulator played ops the executor did not run";
    }
    const int S = layout.num_stages(), M = c.num_microbatches;
    ASSERT_EQ(when.size(), static_cast<size_t>(2 * S * M));
    const int F = static_cast<int>(OpType::kForward), B = static_cast<int>(OpType::kBackward);
    for (int i = 0; i < S; ++i) {
      for (int mb = 0; mb < M; ++mb) {
        const auto f = when.at({F, i, mb}), b = when.at({B, i, mb});
        if (i > 0) {
          EXPECT_LT(when.at({F, i - 1, mb}).second, f.first) << "F" << i << "." << mb;
        }
        EXPECT_LT(f.second, b.first) << "B" << i << "." << mb << " before its forward";
        if (i < S - 1) {
          EXPECT_LT(when.at({B, i + 1, mb}).second, b.first) << "B" << i << "." << mb;
        }
      }
    }
  }
  std::cout << "# " << schedules.size() << " schedules of " << variants << " scenario variants, "
            << pairs << " combined pairs\n";
  // The scenarios run every schedule kind, combined 1F1B with steady pairs.
  EXPECT_EQ(kinds.size(), schedule::all_schedule_kinds().size());
  EXPECT_GT(pairs, 0);
}

}  // namespace
}  // namespace mtp::engine
