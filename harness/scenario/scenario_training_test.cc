// The [training] keys that name a record or the optimizer state: init_from, save_optimizer_state.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/scenario/scenario.h"

namespace mtp::scenario {
namespace {

using ::testing::HasSubstr;

std::string with_training(const std::string& training) {
  return "[scenario]\nname = \"t\"\n[training]\n" + training +
         "\n[[variant]]\nname = \"a\"\nimplementation = \"reference\"\n";
}

std::string error_of(const std::string& training) {
  try {
    parse_scenario(with_training(training), "t.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ScenarioTrainingTest, InitFromAndSaveOptimizerState) {
  const Scenario plain = parse_scenario(with_training(""), "t.toml");
  EXPECT_FALSE(plain.training.init_from.has_value());
  EXPECT_FALSE(plain.training.save_optimizer_state);
  EXPECT_FALSE(plain.training.resume_from.has_value());
  const Scenario sc = parse_scenario(
      with_training("init_from = \"runs/x/a.h5:2\"\nsave_optimizer_state = true"), "t.toml");
  ASSERT_TRUE(sc.training.init_from.has_value());
  EXPECT_EQ(sc.training.init_from->path, "runs/x/a.h5");
  EXPECT_EQ(sc.training.init_from->step, 2);
  EXPECT_TRUE(sc.training.save_optimizer_state);
  const Scenario step0 = parse_scenario(with_training("init_from = \"a.h5\""), "t.toml");
  EXPECT_EQ(step0.training.init_from->step, 0);
}

TEST(ScenarioTrainingTest, BadInitFromNamesFileLineColumnAndRule) {
  EXPECT_EQ(error_of("steps = 2\ninit_from = \"a.h5:two\""),
            "t.toml:5:13: [training].init_from = \"a.h5:two\": step \"two\" must be an integer "
            "in [0, 1000000] (expected REC.h5[:STEP])");
  EXPECT_THAT(error_of("init_from = \"a.h5:\""), HasSubstr("t.toml:4:13: [training].init_from"));
  EXPECT_THAT(error_of("init_from = 3"), HasSubstr("t.toml:4:13: [training].init_from must be a "
                                                   "string"));
  EXPECT_THAT(error_of("save_optimizer_state = \"yes\""),
              HasSubstr("t.toml:4:24: [training].save_optimizer_state must be true or false"));
}

}  // namespace
}  // namespace mtp::scenario
