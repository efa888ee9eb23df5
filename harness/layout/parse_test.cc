// Tests of parse_layout: the parser vectors of spec §2.7 and every grammar error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/layout/layout.h"
#include "harness/layout/test_util.h"

namespace mtp::layout {
namespace {

using ::testing::HasSubstr;
using Stages = std::vector<std::string>;
using test_util::layout_error;

Stages stages(const std::string& text) { return parse_layout(text).stages; }

std::string parse_error(const std::string& text) {
  return layout_error([&] { parse_layout(text); });
}

// Spec §2.7 (Megatron test_transformer_block.py parser vectors).
TEST(ParseLayoutTest, SpecParserVectors) {
  EXPECT_EQ(stages("Et|t*4|t|tL"), (Stages{"Et", "tttt", "t", "tL"}));
  EXPECT_EQ(stages("E|t*6|t|L"), (Stages{"E", "tttttt", "t", "L"}));
  EXPECT_EQ(stages("E|t|t*2|t||(t|)*2,t*2,L"), (Stages{"E", "t", "tt", "t", "", "t", "t", "ttL"}));

  Stages deepseek{"Ettt"};
  for (int i = 0; i < 29; ++i) deepseek.push_back("tt");
  deepseek.push_back("m");
  deepseek.push_back("L");
  EXPECT_EQ(stages("Et*3|(tt|)*29,m|L"), deepseek);

  Stages p16{"Ett"};
  for (int i = 0; i < 29; ++i) p16.push_back("tt");
  p16.push_back("t");
  p16.push_back("mL");
  EXPECT_EQ(stages("Et*2|(tt|)*29,t|mL"), p16);
}

TEST(ParseLayoutTest, KeepsTheTextAsGiven) { EXPECT_EQ(parse_layout("E,t*2|L").text, "E,t*2|L"); }

TEST(ParseLayoutTest, SeparatorsMakeEmptyStages) {
  EXPECT_EQ(stages("|Et|tL|"), (Stages{"", "Et", "tL", ""}));
  EXPECT_EQ(stages("E||L"), (Stages{"E", "", "L"}));
  EXPECT_EQ(stages("E|*3L"), (Stages{"E", "", "", "L"}));  // `|` repeats like any character
  EXPECT_EQ(stages(""), (Stages{""}));
  EXPECT_EQ(stages("|"), (Stages{"", ""}));
}

TEST(ParseLayoutTest, CommasAreRemovedFirst) {
  EXPECT_EQ(stages(",E,,|,L,"), (Stages{"E", "L"}));
  EXPECT_EQ(stages("Et*1,0|L"), (Stages{"E" + std::string(10, 't'), "L"}));
  EXPECT_EQ(stages("Et,*,2|L"), (Stages{"Ett", "L"}));
}

TEST(ParseLayoutTest, RepeatsAndGroups) {
  EXPECT_EQ(stages("Et*03|m*2L"), (Stages{"Ettt", "mmL"}));   // leading zeros are fine
  EXPECT_EQ(stages("(t*2|)*2L"), (Stages{"tt", "tt", "L"}));  // repeats inside a group
  EXPECT_EQ(stages("E(t)*3|L"), (Stages{"Ettt", "L"}));
  EXPECT_EQ(stages("(t|)*1L"), (Stages{"t", "L"}));
  EXPECT_EQ(stages("t*100000"), (Stages{std::string(100000, 't')}));  // exactly the cap
}

TEST(ParseLayoutTest, MissingCountNamesPositionAndCharacter) {
  EXPECT_EQ(parse_error("E|t*|L"),
            "layout \"E|t*|L\": position 4: '*' must be followed by a repeat count (digits), "
            "found '|'");
  const std::string at_end = parse_error("Et*");
  EXPECT_THAT(at_end, HasSubstr("position 3: '*' must be followed by a repeat count"));
  EXPECT_THAT(at_end, HasSubstr("found the end of the string"));
  // Positions refer to the string as given, commas included.
  EXPECT_THAT(parse_error("E,,|t*,|L"), HasSubstr("layout \"E,,|t*,|L\": position 7: '*' must"));
}

TEST(ParseLayoutTest, RejectsCountZero) {
  EXPECT_EQ(parse_error("Et*0|L"),
            "layout \"Et*0|L\": position 3: a repeat count must be at least 1, found 0");
  EXPECT_THAT(parse_error("E|(t|)*00L"), HasSubstr("position 7: a repeat count must be at least"));
}

TEST(ParseLayoutTest, RejectsUnknownCharacters) {
  EXPECT_EQ(parse_error("Et|tX"),
            "layout \"Et|tX\": position 4: unknown character (allowed: E t m L | * ( ) , and "
            "digits), found 'X'");
  EXPECT_THAT(parse_error("et|L"), HasSubstr("position 0: unknown character"));
  EXPECT_THAT(parse_error("E t"), HasSubstr("position 1: unknown character"));
  const std::string ctrl = parse_error(std::string("Et\x01", 3));
  EXPECT_THAT(ctrl, HasSubstr("layout \"Et\\x01\": position 2: unknown character"));
  EXPECT_THAT(ctrl, HasSubstr("found '\\x01'"));
  EXPECT_THAT(parse_error(std::string("E\0t", 3)), HasSubstr("position 1: unknown character"));
}

TEST(ParseLayoutTest, RejectsDigitsOutsideACount) {
  EXPECT_EQ(parse_error("Et3|L"),
            "layout \"Et3|L\": position 2: a digit may only appear in a repeat count after '*', "
            "found '3'");
}

TEST(ParseLayoutTest, RejectsStarWithNothingBefore) {
  EXPECT_EQ(parse_error("*3E"),
            "layout \"*3E\": position 0: '*' must follow a layout character (E t m L |) or a "
            "parenthesised group, found '*' with nothing before it to repeat");
  EXPECT_THAT(parse_error("E|(*2t)*2L"), HasSubstr("position 3: '*' must follow a layout"));
  EXPECT_THAT(parse_error(",*2"), HasSubstr("position 1: '*' must follow a layout"));
}

TEST(ParseLayoutTest, RejectsARepeatedRepeat) {
  EXPECT_THAT(parse_error("Et*2*3L"),
              HasSubstr("position 4: '*' must not follow a repeat count (a repeat cannot be "
                        "repeated)"));
  EXPECT_THAT(parse_error("E|(t|)*2*3L"), HasSubstr("position 8: '*' must not follow"));
}

TEST(ParseLayoutTest, RejectsNestedParentheses) {
  EXPECT_EQ(parse_error("E|((t|)*2)*2L"),
            "layout \"E|((t|)*2)*2L\": position 3: parentheses must not be nested, found '('");
}

TEST(ParseLayoutTest, RejectsUnbalancedParentheses) {
  EXPECT_EQ(parse_error("E|(t|*2L"), "layout \"E|(t|*2L\": position 2: '(' has no matching ')'");
  EXPECT_EQ(parse_error("E|t)*2L"),
            "layout \"E|t)*2L\": position 3: ')' has no matching '(', found ')'");
}

TEST(ParseLayoutTest, RejectsAGroupWithoutCount) {
  EXPECT_EQ(parse_error("E|(t|)L"),
            "layout \"E|(t|)L\": position 6: a parenthesised group must be followed by '*' and a "
            "repeat count, found 'L'");
  EXPECT_THAT(parse_error("E|(t|)"), HasSubstr("position 6: a parenthesised group must be "
                                               "followed by '*' and a repeat count, found the "
                                               "end of the string"));
  EXPECT_THAT(parse_error("E|(t|)*"), HasSubstr("position 7: '*' must be followed by a repeat"));
}

TEST(ParseLayoutTest, RejectsAnEmptyGroup) {
  EXPECT_THAT(parse_error("E()*2L"),
              HasSubstr("position 2: a parenthesised group must not be empty"));
}

TEST(ParseLayoutTest, CapsTheExpandedLength) {
  EXPECT_THAT(parse_error("Et*99999999999999999999999|L"),
              HasSubstr("position 2: the expanded layout must not exceed 100000 characters"));
  EXPECT_THAT(parse_error("E(tt|)*60000L"),
              HasSubstr("position 1: the expanded layout must not exceed 100000 characters"));
  EXPECT_THAT(parse_error("Et*100000"), HasSubstr("must not exceed 100000 characters"));
  EXPECT_THAT(parse_error("(t*1000|)*1000"), HasSubstr("must not exceed 100000 characters"));
  EXPECT_THAT(parse_error(std::string(100001, 't')),
              HasSubstr("position 100000: the expanded layout must not exceed"));
}

TEST(ParseLayoutTest, ShortensVeryLongLayoutsInMessages) {
  const std::string text = std::string(299, 't') + "X";
  const std::string msg = parse_error(text);
  EXPECT_THAT(msg, HasSubstr("...\" (300 characters): position 299: unknown character"));
  EXPECT_LT(msg.size(), 400u);
}

}  // namespace
}  // namespace mtp::layout
