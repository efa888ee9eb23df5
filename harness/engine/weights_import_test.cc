// Weights in by name: a record's step-0 weights come back exactly, in canonical order, and every
// mismatch with the model names the parameter.
#include "harness/engine/weights_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "harness/model/params.h"

namespace mtp::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

config::ModelConfig tiny(bool untied = true) {
  config::ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.num_query_groups = 1;  // GQA: linear_qkv has (nh + 2·ng)·hn = 32 rows
  c.ffn_hidden_size = 24;
  c.seq_length = 8;
  c.mtp_num_layers = 1;
  c.untie_embeddings = untied;
  return c;
}

record::TensorData to_data(const std::string& name, const at::Tensor& v) {
  record::TensorData d;
  d.name = name;
  d.dtype = v.scalar_type() == at::kDouble ? record::DType::kF64 : record::DType::kF32;
  d.shape = v.sizes().vec();
  d.bytes.resize(v.nbytes());
  std::memcpy(d.bytes.data(), v.contiguous().data_ptr(), v.nbytes());
  return d;
}

/// Writes `w` as step 0 of a record, cast to `dtype`, as the trainer records initial weights.
std::string write_record(const std::string& name, const InitialWeights& w, at::ScalarType dtype) {
  const std::string path = testing::TempDir() + name;
  record::RecordWriter rec(path);
  for (size_t i = 0; i < w.specs.size(); ++i) {
    rec.write(0, "weight", to_data(w.specs[i].name, w.values[i].to(dtype)));
  }
  rec.commit();
  return path;
}

std::string error_of(const std::string& path, const config::ModelConfig& cfg) {
  try {
    initial_weights_from_record(record::RecordReader(path), 0, cfg);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(WeightsImportTest, Float32AndFloat64RecordsComeBackExactly) {
  const auto cfg = tiny();
  const InitialWeights seeded = make_initial_weights(cfg, 11);
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const std::string path = write_record(dtype == at::kFloat ? "w32.h5" : "w64.h5", seeded, dtype);
    const InitialWeights got = initial_weights_from_record(record::RecordReader(path), 0, cfg);
    ASSERT_EQ(got.specs.size(), seeded.specs.size());
    for (size_t i = 0; i < got.specs.size(); ++i) {
      EXPECT_EQ(got.specs[i].name, seeded.specs[i].name);
      EXPECT_EQ(got.values[i].scalar_type(), at::kDouble) << got.specs[i].name;
      // float32 → float64 widens exactly: the value is the recorded float32, bit for bit.
      EXPECT_TRUE(at::equal(got.values[i], seeded.values[i].to(dtype).to(at::kDouble)))
          << got.specs[i].name;
    }
  }
}

TEST(WeightsImportTest, MismatchesNameTheParameter) {
  const InitialWeights untied = make_initial_weights(tiny(), 11);
  const std::string path = write_record("untied.h5", untied, at::kFloat);
  EXPECT_THAT(error_of(path, tiny(/*untied=*/false)),
              AllOf(HasSubstr("untied.h5: steps/000000/weight/output_layer.weight: extra tensor"),
                    HasSubstr("not a parameter of this model")));
  EXPECT_THAT(
      error_of(write_record("tied.h5", make_initial_weights(tiny(false), 11), at::kFloat), tiny()),
      HasSubstr("parameter output_layer.weight is missing"));
  auto wider = tiny();
  wider.ffn_hidden_size = 32;
  EXPECT_THAT(error_of(path, wider),
              HasSubstr("decoder.layers.0.mlp.linear_fc1.weight: shape [48, 16] in the record, "
                        "the model's parameter has shape [64, 16]"));
  auto deeper = tiny();
  deeper.mtp_num_layers = 2;
  EXPECT_THAT(error_of(path, deeper), HasSubstr("parameter mtp.layers.1.enorm.weight is missing"));
}

TEST(WeightsImportTest, TensorFromRecordKeepsDtypeShapeAndBytes) {
  const auto d = record::TensorData::from_i32("tokens", {2, 3}, {1, 2, 3, 4, 5, -6});
  const at::Tensor t = tensor_from_record(d);
  EXPECT_EQ(t.scalar_type(), at::kInt);
  EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t[1][2].item<int>(), -6);
  const at::Tensor s = tensor_from_record(record::TensorData::from_f64("lm", {}, {2.5}));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 2.5);
}

}  // namespace
}  // namespace mtp::engine
