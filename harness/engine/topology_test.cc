// Tests of the rank ↔ (pipeline rank, data-parallel rank, context-parallel rank) map (Megatron's
// tp-cp-ep-dp-pp order: r = cp + CP·(dp + DP·pp)) and the groups derived from it.
#include "harness/engine/topology.h"

#include <gtest/gtest.h>

namespace mtp::engine {
namespace {

TEST(TopologyTest, RankOrderIsDataParallelFastest) {
  Topology t(4, 2);
  EXPECT_EQ(t.world_size(), 8);
  EXPECT_EQ(t.rank(0, 1), 1);
  EXPECT_EQ(t.rank(3, 0), 6);
  EXPECT_EQ(t.coord(5).pipeline_rank, 2);
  EXPECT_EQ(t.coord(5).data_parallel_rank, 1);
  for (int r = 0; r < 8; ++r)
    EXPECT_EQ(t.rank(t.coord(r).pipeline_rank, t.coord(r).data_parallel_rank), r);
  EXPECT_THROW(t.rank(4, 0), InternalError);
  EXPECT_THROW(t.coord(8), InternalError);
}

TEST(TopologyTest, GroupsFollowMegatronsExample) {
  // Megatron's parallel_state docstring with TP = 1: P = 2, DP = 2 → data-parallel groups
  // [g0, g1], [g2, g3]; pipeline groups [g0, g2], [g1, g3].
  Topology t(2, 2);
  EXPECT_EQ(t.grad_group(0).ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(t.grad_group(1).ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(t.pipeline_ranks(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(t.pipeline_ranks(1), (std::vector<int>{1, 3}));
  EXPECT_EQ(t.world().ranks, (std::vector<int>{0, 1, 2, 3}));
}

TEST(TopologyTest, StageGroupMapsStagesToTheirPipelineRanksInStageOrder) {
  Topology t(4, 2);
  // Stages 0, 6, 7 of a P = 4, V = 2 layout live on pipeline ranks 0, 2, 3.
  EXPECT_EQ(t.stage_group("embedding group", {0, 6, 7}, 0).ranks, (std::vector<int>{0, 4, 6}));
  EXPECT_EQ(t.stage_group("embedding group", {0, 6, 7}, 1).ranks, (std::vector<int>{1, 5, 7}));
  // Two stages of one pipeline rank count once.
  EXPECT_EQ(t.stage_group("g", {1, 5}, 0).ranks, (std::vector<int>{2}));
}

TEST(TopologyTest, ContextParallelVariesFastestAfterTensorParallel) {
  // P = 2, DP = 2, CP = 2: r = cp + 2·(dp + 2·pp), Megatron's tp-cp-ep-dp-pp with TP = EP = 1.
  Topology t(2, 2, 2);
  EXPECT_EQ(t.world_size(), 8);
  EXPECT_EQ(t.grad_group_size(), 4);
  EXPECT_EQ(t.rank(0, 0, 1), 1);
  EXPECT_EQ(t.rank(0, 1, 0), 2);
  EXPECT_EQ(t.rank(1, 1, 1), 7);
  const RankCoord c = t.coord(6);
  EXPECT_EQ(c.pipeline_rank, 1);
  EXPECT_EQ(c.data_parallel_rank, 1);
  EXPECT_EQ(c.context_parallel_rank, 0);
  EXPECT_EQ(t.grad_group_rank(c), 2);
  for (int r = 0; r < 8; ++r) {
    const RankCoord k = t.coord(r);
    EXPECT_EQ(t.rank(k.pipeline_rank, k.data_parallel_rank, k.context_parallel_rank), r);
  }
  // Context-parallel groups: the CP ranks of one (pp, dp); gradient groups: every (dp, cp) of a
  // pipeline rank (Megatron's data-parallel group with context parallel), grad_group_rank order.
  EXPECT_EQ(t.context_parallel_group(0, 1).ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(t.context_parallel_group(1, 0).ranks, (std::vector<int>{4, 5}));
  EXPECT_EQ(t.grad_group(1).ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(t.pipeline_ranks(1, 1), (std::vector<int>{3, 7}));
  EXPECT_EQ(t.stage_group("embedding group", {0, 3}, 0, 1).ranks, (std::vector<int>{1, 5}));
  EXPECT_THROW(t.rank(0, 0, 2), InternalError);
  EXPECT_THROW(Topology(2, 2, 0), InternalError);
}

TEST(TopologyTest, ExpertGroupsRegroupEachGradientGroup) {
  // P = 2, DP = 4, EP = 2: EP groups are consecutive data-parallel ranks, expert-DP groups the
  // ranks with the same EP rank (Megatron "tp-ep-dp-pp" over the same ranks).
  const Topology t(2, 4, 1, 2);
  EXPECT_EQ(t.world_size(), 8);    // EP adds no rank
  const RankCoord c = t.coord(6);  // pp 1, dp 2
  EXPECT_EQ(t.expert_parallel_rank(c), 0);
  EXPECT_EQ(t.expert_parallel_group(c).ranks, (std::vector<int>{6, 7}));
  EXPECT_EQ(t.expert_data_parallel_group(c).ranks, (std::vector<int>{4, 6}));
  EXPECT_EQ(t.expert_data_parallel_group(t.coord(1)).ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(t.grad_group_member(1, 3), 7);
  // Its own channel: the same ranks' data-parallel group gets another message id.
  const Topology pair(1, 2, 1, 2);
  EXPECT_EQ(pair.expert_parallel_group(pair.coord(0)).ranks, pair.grad_group(0).ranks);
  EXPECT_NE(pair.expert_parallel_group(pair.coord(0)).id(), pair.grad_group(0).id());
  // CP = 2, DP = 2, EP = 4: one EP group spans every (dp, cp) of the pipeline rank.
  const Topology cp(1, 2, 2, 4);
  EXPECT_EQ(cp.expert_parallel_group(cp.coord(2)).ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cp.expert_parallel_rank(cp.coord(2)), 2);
  EXPECT_EQ(cp.expert_data_parallel_group(cp.coord(2)).ranks, (std::vector<int>{2}));
  EXPECT_THROW(Topology(1, 3, 1, 2), InternalError);  // EP must divide DP·CP
}

}  // namespace
}  // namespace mtp::engine
