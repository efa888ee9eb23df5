// Tests of format_rank_map: exact output.
#include <gtest/gtest.h>

#include <string>

#include "harness/layout/layout.h"

namespace mtp::layout {
namespace {

TEST(RankMapTest, StandaloneWithVirtualStages) {
  EXPECT_EQ(format_rank_map(build_layout("E|t*3|(t|)*4tm|L", 4, 8, 1)),
            "layout \"E|t*3|(t|)*4tm|L\"\n"
            "| pp \\ v | 0    | 1         |\n"
            "|--------|------|-----------|\n"
            "| 0      | E    | t5        |\n"
            "| 1      | t0-2 | t6        |\n"
            "| 2      | t3   | t7 FLN m1 |\n"
            "| 3      | t4   | L         |\n"
            "P = 4, V = 2, N = 8, D = 1\n"
            "MTP stage: 6 (p=2, v=1)\n"
            "mtp_standalone: true\n");
}

TEST(RankMapTest, EmptyStagesAndNoMtp) {
  EXPECT_EQ(format_rank_map(build_layout("E|t|tt|t||t|t|ttL", 4, 8, 0)),
            "layout \"E|t|tt|t||t|t|ttL\"\n"
            "| pp \\ v | 0    | 1          |\n"
            "|--------|------|------------|\n"
            "| 0      | E    | -          |\n"
            "| 1      | t0   | t4         |\n"
            "| 2      | t1-2 | t5         |\n"
            "| 3      | t3   | t6-7 FLN L |\n"
            "P = 4, V = 2, N = 8, D = 0\n"
            "MTP stage: none\n"
            "mtp_standalone: false\n");
}

TEST(RankMapTest, SingleStageWithEverything) {
  EXPECT_EQ(format_rank_map(build_layout("Et*8mmL", 1, 8, 2)),
            "layout \"Et*8mmL\"\n"
            "| pp \\ v | 0                 |\n"
            "|--------|-------------------|\n"
            "| 0      | E t0-7 FLN m1-2 L |\n"
            "P = 1, V = 1, N = 8, D = 2\n"
            "MTP stage: 0 (p=0, v=0)\n"
            "mtp_standalone: false\n");
}

}  // namespace
}  // namespace mtp::layout
