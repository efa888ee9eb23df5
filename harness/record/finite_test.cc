// Tests of the non-finite scan (finite.h) and of the first_nonfinite root attribute that the
// writer keeps: every float format, every non-finite class, the first in write order, and a
// finite record without the attribute.
#include "harness/record/finite.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "harness/record/record.h"
#include "harness/record/record_test_util.h"

namespace mtp::record {
namespace {

using ::testing::HasSubstr;

TEST(FindNonFiniteTest, CountsEveryClassAndNamesTheFirstInEachFloatFormat) {
  const float f[] = {1.0f,
                     -0.0f,
                     std::numeric_limits<float>::max(),
                     std::numeric_limits<float>::denorm_min(),
                     -INFINITY,
                     NAN,
                     INFINITY};
  NonFinite n = find_nonfinite(f, sizeof f, DType::kF32);
  EXPECT_EQ(n.count, 3);
  EXPECT_EQ(n.first_index, 4);
  EXPECT_EQ(n.first_bits, 0xff800000u);
  EXPECT_EQ(nonfinite_text(n.first_bits, DType::kF32), "-inf");

  const double d[] = {0.0, std::numeric_limits<double>::max(), -NAN};
  n = find_nonfinite(d, sizeof d, DType::kF64);
  EXPECT_EQ(n.count, 1);
  EXPECT_EQ(n.first_index, 2);
  EXPECT_EQ(nonfinite_text(n.first_bits, DType::kF64), "nan");

  // bfloat16: 0x7f7f is the largest finite value, 0x7f80 +inf, 0xffc1 a negative NaN.
  const uint16_t b[] = {0x3f80, 0x7f7f, 0x0001, 0x7f80, 0xffc1};
  n = find_nonfinite(b, sizeof b, DType::kBF16);
  EXPECT_EQ(n.count, 2);
  EXPECT_EQ(n.first_index, 3);
  EXPECT_EQ(n.first_bits, 0x7f80u);
  EXPECT_EQ(nonfinite_text(0x7f80, DType::kBF16), "inf");
  EXPECT_EQ(nonfinite_text(0xffc1, DType::kBF16), "nan");
  EXPECT_EQ(nonfinite_text(0x7f7f, DType::kBF16), "finite");

  // float16: 0x7bff is 65504, 0x7c00 +inf, 0x7e00 NaN.
  const uint16_t h[] = {0x7bff, 0x7e00, 0x7c00};
  n = find_nonfinite(h, sizeof h, DType::kF16);
  EXPECT_EQ(n.count, 2);
  EXPECT_EQ(n.first_index, 1);
  EXPECT_EQ(nonfinite_text(n.first_bits, DType::kF16), "nan");
}

TEST(FindNonFiniteTest, IntegersAndEmptyTensorsHoldNone) {
  // 0x7f800000 is +inf as a float, but only a number as an int32.
  const int32_t i[] = {0x7f800000, -1};
  const NonFinite n = find_nonfinite(i, sizeof i, DType::kI32);
  EXPECT_EQ(n.count, 0);
  EXPECT_EQ(n.first_index, -1);
  EXPECT_EQ(find_nonfinite(nullptr, 0, DType::kF32).count, 0);
}

TEST(FirstNonFiniteAttrTest, TheWriterKeepsTheFirstNonFiniteInWriteOrder) {
  testing_util::ScratchDir dir;
  const std::string path = dir.file("nan.h5");
  {
    RecordWriter w(path);
    w.write(0, "weight", TensorData::from_f32("w", {2, 2}, {1, 2, 3, 4}));
    w.write(1, "loss", TensorData::from_f32("lm", {}, {2.5f}));
    w.write(1, "grad", TensorData::from_f32("w", {2, 3}, {0, 1, 2, NAN, INFINITY, NAN}));
    w.write(1, "weight", TensorData::from_f32("w", {2, 2}, {1, -INFINITY, 3, 4}));
    // A digest-only tensor whose bytes the caller does not give: its scan comes with it.
    const std::vector<float> v(4, 1.0f);
    const TensorDigest dg = digest_bytes(v.data(), 16, 4, 1);
    const NonFinite given{1, 2, 0x7fc00000u};
    w.write(2, "grad", TensorView{"w", DType::kF32, {4}, nullptr, 16}, Storage::kDigest, &dg, 1,
            &given);
    w.commit();
  }
  const RecordReader r(path);
  const std::optional<NonFiniteValue> v = r.first_nonfinite();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->step, 1);
  EXPECT_EQ(v->group, "grad");
  EXPECT_EQ(v->name, "w");
  EXPECT_EQ(v->first.count, 3);
  EXPECT_EQ(v->first.first_index, 3);
  EXPECT_EQ(v->tensors, 3);
  EXPECT_EQ(v->describe(),
            "step 1 grad/w[1, 0] = nan (0x7fc00000): 3 of its 6 elements and 3 tensor(s) of the "
            "record are not finite");
}

TEST(FirstNonFiniteAttrTest, AFiniteRecordHasNoAttributeAndABadOneIsRefused) {
  testing_util::ScratchDir dir;
  const std::string path = dir.file("finite.h5");
  {
    RecordWriter w(path);
    w.write(1, "loss", TensorData::from_f32("lm", {}, {std::numeric_limits<float>::max()}));
    w.commit();
  }
  const RecordReader r(path);
  EXPECT_FALSE(r.first_nonfinite().has_value());
  EXPECT_EQ(r.attrs().count(kFirstNonFiniteAttr), 0u);

  const std::string bad = dir.file("bad.h5");
  {
    RecordWriter w(bad);
    w.set_attr(kFirstNonFiniteAttr, std::string("{\"step\": 1}"));
    w.commit();
  }
  try {
    RecordReader(bad).first_nonfinite();
    ADD_FAILURE() << "a malformed first_nonfinite attribute was accepted";
  } catch (const RecordError& e) {
    EXPECT_THAT(e.what(), HasSubstr("first_nonfinite"));
  }
}

/// The message of reading first_nonfinite = `json` from a record, "(accepted)" when it reads.
std::string nonfinite_error(const testing_util::ScratchDir& dir, const std::string& json) {
  const std::string path = dir.file("nf.h5");
  {
    RecordWriter w(path);
    w.set_attr(kFirstNonFiniteAttr, json);
    w.commit();
  }
  try {
    RecordReader(path).first_nonfinite();
  } catch (const RecordError& e) {
    return std::string(e.what()).substr(path.size());
  }
  return "(accepted)";
}

// Issue 19 defect 3: the attribute's JSON is read through parse_json, and an object whose fields
// are missing, of the wrong type or inconsistent is a RecordError naming the field and the rule
// (a negative step, an index outside the shape, finite bits, a huge shape used to pass into
// describe()'s element count and overflow).
TEST(FirstNonFiniteAttrTest, InconsistentFieldsAreRefusedByName) {
  testing_util::ScratchDir dir;
  const std::string good = R"({"step": 1, "group": "grad", "name": "w", "dtype": "float32",
      "shape": [2, 3], "count": 3, "index": 3, "bits": 2143289344, "tensors": 3})";
  EXPECT_EQ(nonfinite_error(dir, good), "(accepted)");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return nonfinite_error(dir, s);
  };
  const std::string attr = ": root attribute 'first_nonfinite': ";
  EXPECT_EQ(with("\"step\": 1", "\"step\": -1"),
            attr +
                "\"step\" is -1, outside [0, 999999] (the writer makes {\"step\", \"group\", "
                "\"name\", \"dtype\", \"shape\", \"count\", \"index\", \"bits\", \"tensors\"})");
  EXPECT_THAT(with("\"step\": 1", "\"step\": 1e300"),
              HasSubstr(attr + "\"step\" is a JSON number, not an integer"));
  EXPECT_THAT(with("\"step\": 1,", ""), HasSubstr(attr + "no \"step\""));
  EXPECT_THAT(with("\"grad\"", "7"), HasSubstr(attr + "\"group\" is a JSON number, not a string"));
  EXPECT_THAT(with("\"grad\"", "\"gard\""),
              HasSubstr(attr + "\"group\" is \"gard\", not a record group"));
  EXPECT_THAT(with("\"float32\"", "\"int32\""),
              HasSubstr(attr + "\"dtype\" is int32, which holds no non-finite values"));
  EXPECT_THAT(with("[2, 3]", "[2, -3]"), HasSubstr(attr + "\"shape\" holds -3, not a dimension"));
  EXPECT_THAT(with("[2, 3]", "[4294967296, 4294967296]"),
              HasSubstr(attr + "\"shape\" [4294967296,4294967296] has more than 2^62 elements"));
  EXPECT_THAT(with("\"index\": 3", "\"index\": 6"),
              HasSubstr(attr + "\"index\" is 6, outside [0, 5]"));
  EXPECT_THAT(with("\"count\": 3", "\"count\": 0"),
              HasSubstr(attr + "\"count\" is 0, outside [1, 6]"));
  EXPECT_THAT(with("2143289344", "1065353216"),
              HasSubstr(attr + "\"bits\" 0x3f800000 is not a non-finite float32 value"));
  EXPECT_THAT(with("2143289344", "-1"),
              HasSubstr(attr + "\"bits\" is a JSON number, not an integer >= 0"));
  EXPECT_THAT(with("\"tensors\": 3", "\"tensors\": 0"), HasSubstr(attr + "\"tensors\" is 0"));
  EXPECT_THAT(nonfinite_error(dir, "[1, 2]"), HasSubstr(attr + "a JSON array, not an object"));
  EXPECT_EQ(nonfinite_error(dir, std::string(100000, '[')),
            attr +
                "line 1, column 65 (byte 64): nesting deeper than 64 levels of arrays and "
                "objects");
}

}  // namespace
}  // namespace mtp::record
