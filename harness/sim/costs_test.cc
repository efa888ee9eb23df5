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
      HasSubstr("forward_ms = -1 must be finite and >= 0"));
  EXPECT_THAT(error_of(R"({"schema_version": 1, "nodes": {}, "link": {"bandwidth_gb_per_s": 0,
               "latency_us": 1}})"),
              HasSubstr("link: bandwidth_gb_per_s must be > 0"));
}

}  // namespace
}  // namespace mtp::sim
