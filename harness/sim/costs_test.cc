// Tests of the costs file (costs.h): a table round-trips through JSON, and every malformed file
// is refused naming the source and the key.

#include "harness/sim/costs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/common/error.h"

namespace mtp::sim {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& text) {
  try {
    parse_costs(text, "c.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CostsTest, RoundTripsThroughJson) {
  CostTable t;
  t.gpu = "NVIDIA H200";
  t.notes = {"MoE timed at 32 experts per rank"};
  t.nodes[CostNode::kDecoderMoe] = {1.25, 2.5};
  t.nodes[CostNode::kOutputHead] = {0.75, 1.5};
  t.link = named_link("ib");
  const CostTable u = parse_costs(to_json(t).dump(), "x");
  EXPECT_EQ(u.gpu, "NVIDIA H200");
  EXPECT_EQ(u.notes, t.notes);
  EXPECT_DOUBLE_EQ(u.at(CostNode::kDecoderMoe).backward_ms, 2.5);
  EXPECT_DOUBLE_EQ(u.link.bandwidth_gb_per_s, 50.0);
  EXPECT_DOUBLE_EQ(u.link.latency_us, 5.0);
  EXPECT_THROW(u.at(CostNode::kEmbedding), InputError);
  EXPECT_THROW(named_link("pcie"), InputError);
}

TEST(CostsTest, MalformedFilesNameTheKey) {
  EXPECT_THAT(error_of("{"), HasSubstr("c.json: not JSON"));
  EXPECT_THAT(error_of("{\"schema_version\": 2}"), HasSubstr("schema_version must be 1"));
  EXPECT_THAT(error_of("{\"schema_version\": 1}"), HasSubstr("nodes must be an object"));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {"decoder": {}}})"),
              HasSubstr("c.json: nodes.decoder: not a node kind (accepted: embedding,"));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {"embedding": {"forward_ms": 1}}})"),
              HasSubstr("nodes.embedding: backward_ms must be a number"));
  EXPECT_THAT(
      error_of(
          R"({"schema_version": 1, "nodes": {"embedding": {"forward_ms": -1, "backward_ms": 1}}})"),
      HasSubstr("forward_ms = -1 must be finite, >= 0 and <= 8.64e+07"));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {}, "link": {"bandwidth_gb_per_s": 0,
               "latency_us": 1}})"),
              HasSubstr("link: bandwidth_gb_per_s must be >= 0.001"));
  // Numbers a step cannot be made of: an overflow, a day-long node, an absurd link.
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {"embedding": {"forward_ms": 1e999,
               "backward_ms": 1}}})"),
              HasSubstr("c.json: not JSON that can be read"));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {"embedding": {"forward_ms": 1e308,
               "backward_ms": 1}}})"),
              HasSubstr("forward_ms = 1e+308 must be finite, >= 0 and <= 8.64e+07"));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {}, "link": {"bandwidth_gb_per_s": 1,
               "latency_us": 1e300}})"),
              HasSubstr("latency_us = 1e+300 must be finite, >= 0 and <= 1e+09"));
}

// Node costs hold for the dimensions they were timed at.
TEST(CostsTest, CostsOfAnotherModelAreRefused) {
  CostTable t;
  t.source = "c.json";
  t.measured_at = {{"hidden_size", 64}, {"seq_length", 32}};
  config::ModelConfig m;
  m.hidden_size = 64;
  m.seq_length = 32;
  EXPECT_NO_THROW(check_costs_fit(t, m));
  m.hidden_size = 7168;
  try {
    check_costs_fit(t, m);
    ADD_FAILURE() << "costs of H 64 priced H 7168";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("c.json: the costs were measured with hidden_size = 64 but "
                                    "the model has 7168"));
  }
  t.measured_at = nlohmann::json();  // hand-made costs say nothing: accepted
  EXPECT_NO_THROW(check_costs_fit(t, m));
  // What measured_at records must be whole dimensions: never skipped as "not an integer".
  for (const char* bad :
       {"7168.5", "\"7\"", "1e30", "0", "-64", "9223372036854775808", "18446744073709551617"}) {
    EXPECT_THAT(error_of(std::string(R"({"schema_version": 1, "nodes": {}, "measured_at": )") +
                         R"({"hidden_size": )" + bad + "}}"),
                HasSubstr("c.json: measured_at.hidden_size = "))
        << bad;
  }
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {}, "measured_at": "garbage"})"),
              HasSubstr("c.json: measured_at must be an object"));
  EXPECT_NO_THROW(parse_costs(R"({"schema_version": 1, "nodes": {}, "measured_at":
      {"hidden_size": 7168, "preset": "dsv3", "repeats": 5}})",
                              "c.json"));
}

// A costs file is read as every user-named input is: a regular file of bounded size, so a
// FIFO or /dev/zero is refused before any read (no hang, no unbounded memory).
TEST(CostsTest, OnlyRegularFilesAreRead) {
  auto error_reading = [](const std::string& path) {
    try {
      read_costs(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(error_reading("/tmp"), HasSubstr("costs file '/tmp' is not a regular file"));
  EXPECT_THAT(error_reading("/dev/zero"), HasSubstr("is not a regular file"));
  EXPECT_THAT(error_reading("/nonexistent/c.json"), HasSubstr("does not exist"));
}

// Unknown keys are refused where the schema is closed (the top level, a node, the link), so a
// misspelt "backward_ms" or "latency_us" cannot pass unnoticed.
TEST(CostsTest, UnknownKeysAreRefused) {
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {}, "link_": {}})"),
              HasSubstr("c.json: unknown key \"link_\" (accepted: schema_version, gpu,"));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {"embedding": {"forward_ms": 1,
               "backward_ms": 1, "sideways_ms": 3}}})"),
              HasSubstr("c.json: nodes.embedding: unknown key \"sideways_ms\""));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {}, "link": {"bandwidth_gb_per_s": 1,
               "latency_us": 1, "latency_ms": 1}})"),
              HasSubstr("c.json: link: unknown key \"latency_ms\""));
}

}  // namespace
}  // namespace mtp::sim
