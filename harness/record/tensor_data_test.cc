#include "harness/record/tensor_data.h"

#include <gtest/gtest.h>

#include <cstring>

#include "harness/common/error.h"

namespace mtp::record {
namespace {

TEST(TensorDataTest, DTypeNamesSizesAndKinds) {
  const DType all[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
                       DType::kI32, DType::kI64, DType::kU8};
  const char* names[] = {"float32", "float64", "bfloat16", "float16", "int32", "int64", "uint8"};
  const int sizes[] = {4, 8, 2, 2, 4, 8, 1};
  for (int i = 0; i < 7; ++i) {
    EXPECT_STREQ(dtype_name(all[i]), names[i]);
    EXPECT_EQ(parse_dtype(names[i]), all[i]);
    EXPECT_EQ(dtype_size(all[i]), sizes[i]);
    EXPECT_EQ(dtype_is_float(all[i]), i < 4) << names[i];
  }
}

TEST(TensorDataTest, ParseDTypeRejectsOtherNames) {
  for (const char* bad : {"", "float", "fp32", "Float32", "int16", "bf16"}) {
    try {
      parse_dtype(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("float32, float64, bfloat16"), std::string::npos);
    }
  }
}

TEST(TensorDataTest, NumelOfScalarsEmptyAndArrays) {
  TensorData t;
  EXPECT_EQ(t.numel(), 1);
  t.shape = {2, 0, 3};
  EXPECT_EQ(t.numel(), 0);
  t.shape = {2, 3, 4};
  EXPECT_EQ(t.numel(), 24);
}

TEST(TensorDataTest, FromValuesCopiesBytes) {
  TensorData f = TensorData::from_f32("w", {2}, {1.0f, -0.0f});
  EXPECT_EQ(f.dtype, DType::kF32);
  ASSERT_EQ(f.bytes.size(), 8u);
  uint32_t bits[2];
  std::memcpy(bits, f.bytes.data(), 8);
  EXPECT_EQ(bits[0], 0x3f800000u);
  EXPECT_EQ(bits[1], 0x80000000u);

  EXPECT_EQ(TensorData::from_f64("d", {}, {2.5}).bytes.size(), 8u);
  EXPECT_EQ(TensorData::from_i32("i", {1, 3}, {1, 2, 3}).bytes.size(), 12u);
  TensorData u = TensorData::from_u8("m", {3}, {0, 1, 255});
  EXPECT_EQ(u.dtype, DType::kU8);
  EXPECT_EQ(u.bytes, (std::vector<uint8_t>{0, 1, 255}));
}

TEST(TensorDataTest, FromValuesRejectsAShapeThatDoesNotMatch) {
  EXPECT_THROW(TensorData::from_f32("w", {2, 2}, {1.0f}), InternalError);
}

}  // namespace
}  // namespace mtp::record
