#include "harness/common/glob.h"

#include <gtest/gtest.h>

namespace mtp {
namespace {

TEST(GlobTest, MatchesLiteralsStarsAndQuestionMarks) {
  EXPECT_TRUE(glob_match("output_layer.weight", "output_layer.weight"));
  EXPECT_FALSE(glob_match("output_layer.weight", "output_layer.weights"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("decoder.layers.*.mlp.*", "decoder.layers.3.mlp.linear_fc1.weight"));
  EXPECT_FALSE(glob_match("decoder.layers.*.mlp.*", "mtp.layers.0.transformer_layer.mlp.x"));
  EXPECT_TRUE(glob_match("mtp_?", "mtp_2"));
  EXPECT_FALSE(glob_match("mtp_?", "mtp_12"));
  EXPECT_TRUE(glob_match("*embedding*", "embedding.word_embeddings.weight"));
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXbYbZ"));
}

TEST(GlobTest, MatchAnyOfSeveralPatterns) {
  std::vector<std::string> pats{"loss*", "*.weight"};
  EXPECT_TRUE(glob_match_any(pats, "output_layer.weight"));
  EXPECT_TRUE(glob_match_any(pats, "loss"));
  EXPECT_FALSE(glob_match_any(pats, "tokens"));
  EXPECT_FALSE(glob_match_any({}, "anything"));
}

}  // namespace
}  // namespace mtp
