// The [data] table: kinds, Megatron datasets, mask rules and edge batches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/scenario/scenario.h"

namespace mtp::scenario {
namespace {

using ::testing::HasSubstr;

std::string with_data(const std::string& data) {
  return "[scenario]\nname = \"d\"\n[model]\nvocab_size = 300\n[data]\n" + data +
         "\n[[variant]]\nname = \"a\"\nimplementation = \"reference\"\n";
}

std::string error_of(const std::string& data) {
  try {
    parse_scenario(with_data(data), "d.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ScenarioDataTest, ParsesAMegatronDataset) {
  const Scenario sc = parse_scenario(
      with_data("kind = \"megatron\"\npath_prefix = \"scenarios/data/gpl3_blocks\"\n"
                "eod_token = 299\n"
                "eod_mask_loss = true\nedge_batches = [\"first_label_only\", \"data\"]"),
      "d.toml");
  EXPECT_EQ(sc.data.kind, "megatron");
  EXPECT_EQ(sc.data.path_prefix, "scenarios/data/gpl3_blocks");
  EXPECT_EQ(sc.data.eod_token, 299);
  EXPECT_TRUE(sc.data.eod_mask_loss);
  EXPECT_EQ(sc.data.edge_batches, (std::vector<std::string>{"first_label_only", "data"}));
  EXPECT_EQ(sc.data.mask_token, -1);
}

TEST(ScenarioDataTest, ErrorsNameLineColumnAndRule) {
  EXPECT_THAT(error_of("kind = \"parquet\""), HasSubstr("d.toml:6:8: [data].kind = \"parquet\""));
  EXPECT_THAT(error_of("kind = \"megatron\""), HasSubstr("needs path_prefix"));
  EXPECT_THAT(error_of("kind = \"megatron\"\npath_prefix = \"p\"\npath = \"x\""),
              HasSubstr("d.toml:8:8: [data].path is for kind \"text\""));
  EXPECT_THAT(error_of("path_prefix = \"p\""), HasSubstr("path_prefix is for kind \"megatron\""));
  // The dataset is opened while parsing: a missing one is an error at path_prefix.
  EXPECT_THAT(error_of("kind = \"megatron\"\npath_prefix = \"scenarios/data/nope\""),
              HasSubstr("d.toml:7:15: [data].path_prefix = \"scenarios/data/nope\": data: "
                        "Megatron index 'scenarios/data/nope.idx' does not exist"));
  EXPECT_THAT(error_of("eod_token = 300"),
              HasSubstr("[data].eod_token = 300 is not a token id (vocab_size = 300)"));
  EXPECT_THAT(error_of("eod_token = -1"), HasSubstr("[data].eod_token = -1 must be >= 0"));
  EXPECT_THAT(error_of("mask_token = 300"), HasSubstr("[data].mask_token = 300"));
  EXPECT_THAT(error_of("eod_mask_loss = 1"), HasSubstr("must be true or false"));
  EXPECT_THAT(error_of("edge_batches = [\"data\", \"half\"]"),
              HasSubstr("d.toml:6:25: [data].edge_batches: edge batch \"half\" is unknown"));
  EXPECT_THAT(error_of("edge_batches = \"all_masked\""), HasSubstr("array of strings"));
  EXPECT_THAT(error_of("mask_fractions = [0.5, 1.5]"),
              HasSubstr("d.toml:6:24: [data].mask_fractions entries must be numbers in [0, 1]"));
  EXPECT_THAT(error_of("mask_fractions = [\"half\"]"),
              HasSubstr("d.toml:6:19: [data].mask_fractions"));
  EXPECT_THAT(error_of("mask_fractions = []"), HasSubstr("array of 1 to 100000 numbers"));
  EXPECT_THAT(error_of("mask_fractions = 0.5"), HasSubstr("array of 1 to 100000 numbers"));
}

TEST(ScenarioDataTest, MaskFractionsAreRead) {
  const Scenario sc = parse_scenario(with_data("mask_fractions = [0.25, 0.75, 1]"), "d.toml");
  EXPECT_EQ(sc.data.mask_fractions, (std::vector<double>{0.25, 0.75, 1.0}));
}

}  // namespace
}  // namespace mtp::scenario
