// parse_json: JSON read with bounded size and depth, and every failure an InputError naming the
// source, the position and the rule (issue 19 defects 3 and 7).
#include "harness/common/json_input.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "harness/common/error.h"

namespace mtp {
namespace {

std::string error_of(const std::string& text, const JsonLimits& limits = JsonLimits{}) {
  try {
    parse_json(text, "in.json", limits);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonInputTest, ParsesWhatNlohmannParses) {
  const nlohmann::json j = parse_json(" {\"a\": [1, -2, 3.5, \"x\", true, null, {}]}\n", "in.json");
  EXPECT_EQ(j, nlohmann::json::parse("{\"a\": [1, -2, 3.5, \"x\", true, null, {}]}"));
  EXPECT_EQ(parse_json("18446744073709551615", "in.json").get<uint64_t>(), ~uint64_t{0});
  // 64 levels are accepted (the default limit).
  EXPECT_NO_THROW(parse_json(std::string(64, '[') + std::string(64, ']'), "in.json"));
}

// Defect 3: nesting 100,000 deep crashed `perf merge` (SIGSEGV); now refused at the bracket that
// opens level 65, before anything recursive sees it. Brackets inside strings do not count.
TEST(JsonInputTest, NestingDeeperThanTheLimitIsRefusedWithItsPosition) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of(deep),
            "in.json: line 1, column 65 (byte 64): nesting deeper than 64 levels of arrays and "
            "objects");
  EXPECT_EQ(error_of("{\"a\":\n [[[1]]]}", JsonLimits{1 << 20, 3}),
            "in.json: line 2, column 4 (byte 9): nesting deeper than 3 levels of arrays and "
            "objects");
  EXPECT_NO_THROW(parse_json("[\"[[[[[[\\\"[[[[\"]", "in.json", JsonLimits{1 << 20, 1}));
}

// Defect 7: 1e400 escaped as nlohmann's out_of_range (exit 3); now an InputError at the number.
TEST(JsonInputTest, ANumberOutOfDoubleRangeIsAnInputErrorAtTheNumber) {
  EXPECT_EQ(error_of("{\"real_time\": 1e400}"),
            "in.json: line 1, column 15 (byte 14): number overflow parsing '1e400' (a JSON "
            "number must be a finite double)");
  EXPECT_EQ(error_of("[\n-1e999]"),
            "in.json: line 2, column 1 (byte 2): number overflow parsing '-1e999' (a JSON number "
            "must be a finite double)");
}

TEST(JsonInputTest, SyntaxErrorsNameTheLineAndColumn) {
  EXPECT_EQ(error_of("{\"a\": 1,\n  \"b\": x}"),
            "in.json: line 2, column 8 (byte 16): not valid JSON: syntax error while parsing "
            "value - invalid literal; last read: '\"b\": x'");
  EXPECT_THAT(error_of(""), ::testing::StartsWith("in.json: line 1, column 1 (byte 0): "));
  EXPECT_THAT(error_of("[1] [2]"), ::testing::HasSubstr("expected end of input"));
  EXPECT_THAT(error_of("\"\xff\""), ::testing::HasSubstr("ill-formed UTF-8"));
}

TEST(JsonInputTest, DuplicateKeysAreRefusedWithTheirPath) {
  EXPECT_EQ(error_of("{\"benchmarks\": [{}, {\"real_time\": 1, \"real_time\": 2}]}"),
            "in.json: at benchmarks[1]: duplicate key \"real_time\" (each key of an object must "
            "be unique)");
  EXPECT_EQ(error_of("{\"a\": 1, \"a\": 1}"),
            "in.json: at the top level: duplicate key \"a\" (each key of an object must be "
            "unique)");
  EXPECT_NO_THROW(parse_json("[{\"a\": 1}, {\"a\": 1}]", "in.json"));
}

TEST(JsonInputTest, TextsOverTheSizeLimitAreRefusedBeforeParsing) {
  EXPECT_EQ(error_of("[1, 2, 3]", JsonLimits{8, 64}),
            "in.json: 9 bytes of JSON, more than the 8 bytes it may have here");
}

}  // namespace
}  // namespace mtp
