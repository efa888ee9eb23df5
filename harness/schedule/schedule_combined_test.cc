// Combined 1F1B ("EP A2A overlap", spec §4.6): the interleaved table with one more warm-up
// forward; with P = 1 the no-pipelining overlap pattern. Orders derived by hand from the
// formulas of spec §4.5 with W + 1.
#include <gtest/gtest.h>

#include "harness/schedule/schedule.h"

namespace mtp::schedule {
namespace {

ScheduleConfig combined(int p, int v, int m, int n) {
  return ScheduleConfig{ScheduleKind::kCombined1F1B, p, v, m, n};
}

TEST(CombinedScheduleTest, OneMoreWarmupThanInterleavedP2V2M4N2) {
  auto c = combined(2, 2, 4, 2);
  EXPECT_EQ(warmup_steps(c, 0), 5);
  EXPECT_EQ(warmup_steps(c, 1), 3);
  EXPECT_EQ(
      format_ops(rank_ops(c, 0)),
      "F0.0 F0.1 F1.0 F1.1 F0.2 (F0.3 B1.0) (F1.2 B1.1) (F1.3 B0.0) B0.1 B1.2 B1.3 B0.2 B0.3");
  EXPECT_EQ(format_ops(rank_ops(c, 1)),
            "F0.0 F0.1 F1.0 (F1.1 B1.0) (F0.2 B1.1) (F0.3 B0.0) (F1.2 B0.1) (F1.3 B1.2) B1.3 B0.2 "
            "B0.3");
}

TEST(CombinedScheduleTest, WarmupOfP4V2M8N4IsInterleavedPlusOne) {
  auto c = combined(4, 2, 8, 4);
  auto i = c;
  i.kind = ScheduleKind::kInterleaved;
  for (int r = 0; r < 4; ++r) EXPECT_EQ(warmup_steps(c, r), warmup_steps(i, r) + 1) << r;
  // Rank 3: W = 5: F0.0-3 F1.0, then (F1.1 B1.0) …
  EXPECT_EQ(format_ops(rank_ops(c, 3)).substr(0, 42), "F0.0 F0.1 F0.2 F0.3 F1.0 (F1.1 B1.0) (F1.2");
}

TEST(CombinedScheduleTest, NoPipeliningOverlapPattern) {
  EXPECT_EQ(format_ops(rank_ops(combined(1, 1, 4, 0), 0)),
            "F0.0 (F0.1 B0.0) (F0.2 B0.1) (F0.3 B0.2) B0.3");
  EXPECT_EQ(format_ops(rank_ops(combined(1, 1, 1, 0), 0)), "F0.0 B0.0");
  EXPECT_EQ(parse_schedule_kind("combined_1f1b"), ScheduleKind::kCombined1F1B);
  EXPECT_EQ(schedule_kind_name(ScheduleKind::kCombined1F1B), "combined_1f1b");
  EXPECT_THROW(validate(combined(1, 2, 4, 0)), ScheduleError);
  EXPECT_THROW(validate(combined(4, 2, 8, 3)), ScheduleError);
}

}  // namespace
}  // namespace mtp::schedule
