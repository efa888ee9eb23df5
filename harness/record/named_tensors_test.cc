// Tensors by name from a record: exact order and bytes, and every mismatch named.
#include "harness/record/named_tensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/record/record_test_util.h"

namespace mtp::record {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_util::ScratchDir;

const std::vector<ExpectedTensor> kModel = {{"embedding.word_embeddings.weight", {3, 2}},
                                            {"decoder.final_layernorm.weight", {2}},
                                            {"output_layer.weight", {3, 2}}};

/// A record whose step 0 holds `weights` (written in the order given).
std::string record_with(const ScratchDir& dir, const std::string& name,
                        const std::vector<TensorData>& weights) {
  const std::string path = dir.file(name);
  RecordWriter w(path);
  for (const auto& t : weights) w.write(0, "weight", t);
  w.write(1, "loss", TensorData::from_f32("lm", {}, {1.0f}));
  w.commit();
  return path;
}

std::string error_of(const std::string& path, const std::vector<ExpectedTensor>& expected,
                     int step = 0) {
  try {
    read_named_tensors(RecordReader(path), step, Group::kWeight, expected);
  } catch (const RecordError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NamedTensorsTest, ReturnsTheExpectedOrderWithTheRecordedBytes) {
  ScratchDir dir;
  const auto emb =
      TensorData::from_f32("embedding.word_embeddings.weight", {3, 2}, {1, 2, 3, 4, 5, 6});
  const auto fln = TensorData::from_f64("decoder.final_layernorm.weight", {2}, {0.5, -0.25});
  const auto out = TensorData::from_f32("output_layer.weight", {3, 2}, {-1, -2, -3, -4, -5, -6});
  // Written in another order than the model's: the result follows `expected`.
  const std::string path = record_with(dir, "ok.h5", {out, emb, fln});
  const auto got = read_named_tensors(RecordReader(path), 0, Group::kWeight, kModel);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].name, emb.name);
  EXPECT_EQ(got[0].bytes, emb.bytes);
  EXPECT_EQ(got[1].dtype, DType::kF64);
  EXPECT_EQ(got[1].bytes, fln.bytes);
  EXPECT_EQ(got[2].bytes, out.bytes);
}

TEST(NamedTensorsTest, NamesMissingExtraAndMismatchedParameters) {
  ScratchDir dir;
  const auto emb =
      TensorData::from_f32("embedding.word_embeddings.weight", {3, 2}, {1, 2, 3, 4, 5, 6});
  const auto fln = TensorData::from_f32("decoder.final_layernorm.weight", {2}, {1, 1});
  const auto out = TensorData::from_f32("output_layer.weight", {3, 2}, {1, 2, 3, 4, 5, 6});
  const std::string tied = record_with(dir, "tied.h5", {emb, fln});
  EXPECT_THAT(error_of(tied, kModel),
              AllOf(HasSubstr("tied.h5: steps/000000/weight: parameter output_layer.weight is "
                              "missing"),
                    HasSubstr("1 of 3 expected names absent")));
  EXPECT_THAT(error_of(record_with(dir, "untied.h5", {emb, fln, out}), {kModel[0], kModel[1]}),
              AllOf(HasSubstr("untied.h5: steps/000000/weight/output_layer.weight: extra tensor"),
                    HasSubstr("not a parameter of this model")));
  const auto fln3 = TensorData::from_f32("decoder.final_layernorm.weight", {3}, {1, 1, 1});
  EXPECT_THAT(error_of(record_with(dir, "shape.h5", {emb, fln3, out}), kModel),
              HasSubstr("steps/000000/weight/decoder.final_layernorm.weight: shape [3] in the "
                        "record, the model's parameter has shape [2]"));
  const auto int_emb =
      TensorData::from_i32("embedding.word_embeddings.weight", {3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(error_of(record_with(dir, "int.h5", {int_emb, fln, out}), kModel),
              HasSubstr("embedding.word_embeddings.weight: dtype int32, but a weight must be "
                        "floating point"));
  EXPECT_THAT(error_of(tied, kModel, /*step=*/5), HasSubstr("no step 5"));
  EXPECT_THAT(error_of(tied, kModel, /*step=*/1), HasSubstr("no group 'weight' in step 1"));
}

}  // namespace
}  // namespace mtp::record
