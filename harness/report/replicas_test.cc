// Tests of evaluate_replicas (replicas.h) on hand-written records: equal copies hold, a drifted
// copy fails naming the step, the copy, the element and both bit patterns, digest-only copies
// still fail (by block), the bf16 model weights are the reference when the step has them, and a
// step without copies or a record without any copy never passes.

#include "harness/report/replicas.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/common/test_util.h"
#include "harness/record/record.h"

namespace mtp::report {
namespace {

using record::Storage;
using record::TensorData;
using ::testing::HasSubstr;

const std::string kCopy = record::copy_name("w", 0, 2);  // "w@dp0.stage2"

scenario::Expectation replicas(std::vector<std::string> variants) {
  scenario::Expectation e;
  e.name = "r";
  e.variants = std::move(variants);
  e.judge = scenario::Judge::kReplicas;
  e.cls = compare::CompareClass::parse("bitwise");
  e.selection.groups = {"copies"};
  e.why = "test";
  return e;
}

/// Steps 0 and 1: weight/w and the copy w@dp0.stage2; step 1's copy is `drifted`.
void write(const std::string& path, const std::vector<float>& drifted,
           Storage storage = Storage::kFull) {
  record::RecordWriter w(path);
  const std::vector<float> owner{1.0f, 2.0f, 3.0f, 4.0f};
  for (int step : {0, 1}) {
    w.write(step, "weight", TensorData::from_f32("w", {2, 2}, owner));
    w.write(step, "copies", TensorData::from_f32(kCopy, {2, 2}, step == 1 ? drifted : owner),
            storage);
  }
  w.commit();
}

TEST(ReplicasTest, CopiesEqualToTheRecordedOneHold) {
  testing_util::ScratchDir dir;
  write(dir.file("a.h5"), {1.0f, 2.0f, 3.0f, 4.0f});
  const scenario::Expectation e = replicas({"a"});
  const ExpectationResult r = evaluate_replicas(e, {{"a", dir.file("a.h5")}});
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_TRUE(r.holds);
  EXPECT_EQ(r.pairs[0].other, "copies");
  EXPECT_EQ(r.pairs[0].result.tensors_compared, 2);  // the copy at steps 0 and 1
}

TEST(ReplicasTest, ADriftedCopyFailsWithStepCopyElementAndBits) {
  testing_util::ScratchDir dir;
  write(dir.file("a.h5"), {1.0f, 2.0f, 3.0f, 4.0000005f});
  const scenario::Expectation e = replicas({"a"});
  const ExpectationResult r = evaluate_replicas(e, {{"a", dir.file("a.h5")}});
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_FALSE(r.holds);
  const auto& fd = r.pairs[0].result.first_divergence;
  ASSERT_TRUE(fd.has_value());
  EXPECT_EQ(fd->step, 1);
  EXPECT_EQ(fd->group, "copies");
  EXPECT_EQ(fd->name, "w@dp0.stage2");
  EXPECT_EQ(fd->first_index, 3);
  EXPECT_EQ(fd->first_coord, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(fd->a_bits, "0x40800001");  // the copy: 4 + one ULP
  EXPECT_EQ(fd->b_bits, "0x40800000");  // the recorded copy
  // Step 0 alone holds.
  scenario::Expectation first = e;
  first.selection.steps = {0};
  EXPECT_TRUE(evaluate_replicas(first, {{"a", dir.file("a.h5")}}).holds);
  // A pattern that leaves out the parameter leaves nothing to check: not a pass.
  scenario::Expectation none = e;
  none.selection.exclude = {"w"};
  const ExpectationResult n = evaluate_replicas(none, {{"a", dir.file("a.h5")}});
  EXPECT_FALSE(n.holds);
  EXPECT_THAT(n.pairs[0].note, HasSubstr("no parameter copy to check"));
}

TEST(ReplicasTest, DigestOnlyCopiesFailByBlock) {
  testing_util::ScratchDir dir;
  write(dir.file("a.h5"), {1.0f, 2.0f, 3.5f, 4.0f}, Storage::kDigest);
  const ExpectationResult r = evaluate_replicas(replicas({"a"}), {{"a", dir.file("a.h5")}});
  EXPECT_FALSE(r.holds);
  const auto& fd = r.pairs[0].result.first_divergence;
  ASSERT_TRUE(fd.has_value());
  EXPECT_TRUE(fd->by_digest);
  EXPECT_EQ(fd->step, 1);
  EXPECT_EQ(fd->first_block, 0);
}

TEST(ReplicasTest, Bf16CopiesAreComparedWithTheModelWeights) {
  testing_util::ScratchDir dir;
  {
    record::RecordWriter w(dir.file("a.h5"));
    // The fp32 master differs from the bf16 model weight; the copy is a model weight.
    w.write(1, "weight", TensorData::from_f32("w", {2}, {1.001f, 2.0f}));
    w.write(1, "model_weight", TensorData::from_f32("w", {2}, {1.0f, 2.0f}));
    w.write(1, "copies", TensorData::from_f32(kCopy, {2}, {1.0f, 2.0f}));
    w.commit();
  }
  EXPECT_TRUE(evaluate_replicas(replicas({"a"}), {{"a", dir.file("a.h5")}}).holds);
}

TEST(ReplicasTest, AStepWithoutCopiesFails) {
  testing_util::ScratchDir dir;
  {
    record::RecordWriter w(dir.file("a.h5"));
    w.write(1, "weight", TensorData::from_f32("w", {2}, {1.0f, 2.0f}));
    w.commit();
  }
  const ExpectationResult r = evaluate_replicas(replicas({"a"}), {{"a", dir.file("a.h5")}});
  EXPECT_FALSE(r.holds);
  ASSERT_TRUE(r.pairs[0].result.first_divergence.has_value());
  EXPECT_THAT(r.pairs[0].result.first_divergence->structural, HasSubstr("record_copies = true"));
}

TEST(ReplicasTest, CopyNamesRoundTrip) {
  EXPECT_EQ(record::copy_name("embedding.word_embeddings.weight", 1, 12),
            "embedding.word_embeddings.weight@dp1.stage12");
  EXPECT_EQ(record::copied_param("embedding.word_embeddings.weight@dp1.stage12"),
            "embedding.word_embeddings.weight");
  EXPECT_EQ(record::copied_param("w@dp1.stage"), "");
  EXPECT_EQ(record::copied_param("w@dp1.stage2x"), "");
  EXPECT_EQ(record::copied_param("w@dp01.stage2"), "");
  EXPECT_EQ(record::copied_param("@dp0.stage2"), "");
  EXPECT_EQ(record::copied_param("w"), "");
}

}  // namespace
}  // namespace mtp::report
