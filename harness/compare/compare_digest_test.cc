// compare_records on records with digests: equal digests decide without reading values,
// digest-only records localise a difference to its block, and values are read chunk by chunk.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "harness/compare/compare.h"
#include "harness/record/h5.h"
#include "harness/record/record_test_util.h"

namespace mtp::compare {
namespace {

using record::RecordReader;
using record::RecordWriter;
using record::Storage;
using record::TensorData;
using record::testing_util::ScratchDir;
using ::testing::HasSubstr;

constexpr int64_t kBlock = record::kDigestBlockElements;

/// float32 [rows, kBlock / 2]: element i holds i · 0.5.
TensorData ramp(const std::string& name, int64_t rows) {
  std::vector<float> v(static_cast<size_t>(rows * (kBlock / 2)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  return TensorData::from_f32(name, {rows, kBlock / 2}, v);
}

void flip_last_bit(TensorData& t, int64_t element) {
  uint32_t bits;
  std::memcpy(&bits, t.bytes.data() + 4 * element, 4);
  bits ^= 1u;
  std::memcpy(t.bytes.data() + 4 * element, &bits, 4);
}

/// One step: a loss (always full) and a grad of `rows` rows, kept with `storage`.
void write(const std::string& path, const TensorData& grad, Storage storage) {
  RecordWriter w(path);
  w.write(1, "loss", TensorData::from_f32("lm", {}, {2.5f}));
  w.write(1, "grad", grad, storage);
  w.commit();
}

CompareResult compare(const std::string& a, const std::string& b, const std::string& cls,
                      const CompareOptions& options = CompareOptions()) {
  RecordReader ra(a), rb(b);
  Selection sel;
  sel.groups = {"loss", "grad"};
  return compare_records_with(ra, rb, CompareClass::parse(cls), sel, options);
}

TEST(CompareDigestTest, EqualDigestsDecideWithoutReadingTheValues) {
  ScratchDir dir;
  const TensorData g = ramp("w", 6);
  write(dir.file("a.h5"), g, Storage::kFull);
  write(dir.file("b.h5"), g, Storage::kFull);
  // Spoil B's bytes in the file behind HDF5's back: the digests still say "equal".
  const uint64_t offset = *RecordReader(dir.file("b.h5")).raw_offset(1, "grad", "w");
  {
    std::fstream f(dir.file("b.h5"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset + 4 * 1000));
    const float bad = -1.0f;
    f.write(reinterpret_cast<const char*>(&bad), 4);
  }
  const CompareResult by_digest = compare(dir.file("a.h5"), dir.file("b.h5"), "bitwise");
  EXPECT_TRUE(by_digest.equal);
  EXPECT_EQ(by_digest.tensors_by_digest, 2);
  EXPECT_EQ(by_digest.tensors_compared, 2);
  // ignore_digests reads the values and finds the spoiled element.
  CompareOptions read_values;
  read_values.ignore_digests = true;
  const CompareResult by_value =
      compare(dir.file("a.h5"), dir.file("b.h5"), "bitwise", read_values);
  EXPECT_FALSE(by_value.equal);
  ASSERT_TRUE(by_value.first_divergence);
  EXPECT_EQ(by_value.first_divergence->first_index, 1000);
  EXPECT_EQ(by_value.first_divergence->b_value, "-1");
}

/// Replaces dataset /steps/000001/grad/w of `path` by what `make` creates in its group.
void replace_tensor(const std::string& path, const std::function<void(hid_t group)>& make) {
  record::h5::ErrorSilencer quiet;
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t g = H5Gopen2(f, "/steps/000001/grad", H5P_DEFAULT);
  ASSERT_GE(g, 0);
  ASSERT_GE(H5Ldelete(g, "w", H5P_DEFAULT), 0);
  make(g);
  H5Gclose(g);
  H5Fclose(f);
}

// A verdict resting on the stored digests still opens every dataset and checks it against the
// group's index (no bytes read): a group, or a dataset of another dtype or shape, in a tensor's
// place is a corrupt record (RecordError, exit 2), never "EQUAL by digest".
TEST(CompareDigestTest, EqualDigestsOfACorruptDatasetAreRefused) {
  ScratchDir dir;
  const TensorData g = ramp("w", 2);
  write(dir.file("a.h5"), g, Storage::kFull);
  auto expect_refused = [&](const std::string& b, const std::string& why) {
    try {
      compare(dir.file("a.h5"), b, "bitwise");
      ADD_FAILURE() << why << ": compared";
    } catch (const record::RecordError& e) {
      EXPECT_THAT(e.what(), HasSubstr("/steps/000001/grad/w")) << why;
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  write(dir.file("group.h5"), g, Storage::kFull);
  replace_tensor(dir.file("group.h5"), [](hid_t grp) {
    H5Gclose(H5Gcreate2(grp, "w", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  });
  expect_refused(dir.file("group.h5"), "is not a dataset");
  write(dir.file("ints.h5"), g, Storage::kFull);
  replace_tensor(dir.file("ints.h5"), [](hid_t grp) {
    hsize_t dims[2] = {2, kBlock / 2};
    hid_t space = H5Screate_simple(2, dims, nullptr);
    H5Dclose(H5Dcreate2(grp, "w", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(space);
  });
  try {
    compare(dir.file("a.h5"), dir.file("ints.h5"), "bitwise");
    ADD_FAILURE() << "an int32 dataset compared";
  } catch (const record::RecordError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/steps/000001/grad/w"));
  }
  // The same record, intact, still compares EQUAL by digest.
  write(dir.file("b.h5"), g, Storage::kFull);
  const CompareResult ok = compare(dir.file("a.h5"), dir.file("b.h5"), "bitwise");
  EXPECT_TRUE(ok.equal);
  EXPECT_EQ(ok.tensors_by_digest, 2);
}

TEST(CompareDigestTest, DigestOnlyRecordsNameTheFirstDifferingBlock) {
  ScratchDir dir;
  TensorData g = ramp("w", 8);  // 4 blocks
  write(dir.file("a.h5"), g, Storage::kDigest);
  flip_last_bit(g, 2 * kBlock + 5);
  flip_last_bit(g, 3 * kBlock);
  write(dir.file("b.h5"), g, Storage::kDigest);
  const CompareResult r = compare(dir.file("a.h5"), dir.file("b.h5"), "bitwise");
  EXPECT_FALSE(r.equal);
  ASSERT_TRUE(r.first_divergence);
  const TensorDiff& d = *r.first_divergence;
  EXPECT_EQ(d.name, "w");
  EXPECT_TRUE(d.by_digest);
  EXPECT_EQ(d.blocks, 4);
  EXPECT_EQ(d.differing_blocks, 2);
  EXPECT_EQ(d.first_block, 2);
  // Block 2 starts at flat element 131072 = row 4 of 32768-element rows.
  EXPECT_EQ(d.first_block_coord, (std::vector<int64_t>{4, 0}));
  EXPECT_THAT(d.describe(), HasSubstr("step 1 grad/w: digests differ in 2 of 4 blocks of 65536 "
                                      "elements, first in block 2 (from element [4, 0], flat "
                                      "131072)"));
  // The negative control holds on digests alone.
  EXPECT_TRUE(compare(dir.file("a.h5"), dir.file("b.h5"), "differ").holds());
  // A tolerance cannot be decided without the values: undecided, neither a pass nor a failure.
  const CompareResult tol = compare(dir.file("a.h5"), dir.file("b.h5"), "tol:1,1");
  EXPECT_FALSE(tol.holds());
  EXPECT_TRUE(tol.undecided());
  EXPECT_EQ(tol.tensors_undecided, 1);
  EXPECT_FALSE(tol.first_divergence.has_value()) << "an undecided tensor is no divergence";
  EXPECT_EQ(verdict_text(tol),
            "UNDECIDED tol:1,1: the digests of 1 of 2 tensors differ and their values are not in "
            "the records, so the class cannot be applied (first step 1 grad/w block 2); re-run "
            "with their steps in full (check does; compare --localize re-trains them)");
  EXPECT_THAT(format_report(tol, "a", "b"), HasSubstr("UNDECIDED (tol:1,1)"));
}

// A tensor outside the class decides the comparison even when another is undecided.
TEST(CompareDigestTest, AFailingTensorDecidesBesideAnUndecidedOne) {
  ScratchDir dir;
  TensorData g = ramp("w", 2);
  {
    RecordWriter w(dir.file("a.h5"));
    w.write(1, "loss", TensorData::from_f32("lm", {}, {2.5f}));
    w.write(1, "grad", g, Storage::kDigest);
    w.commit();
  }
  flip_last_bit(g, 7);
  {
    RecordWriter w(dir.file("b.h5"));
    w.write(1, "loss", TensorData::from_f32("lm", {}, {3.5f}));
    w.write(1, "grad", g, Storage::kDigest);
    w.commit();
  }
  const CompareResult r = compare(dir.file("a.h5"), dir.file("b.h5"), "ulp:4");
  EXPECT_FALSE(r.undecided());
  EXPECT_FALSE(r.holds());
  EXPECT_EQ(r.first_divergence->group, "loss");
  EXPECT_EQ(verdict_text(r),
            "FAILS ulp:4: 1 of 2 tensors outside the class; first step 1 loss/lm: a=2.5 "
            "(0x40200000) b=3.5 (0x40600000)");
}

// Each verdict says what it measured: the counts, and for a class with a limit the observed
// extremes and the headroom, computed here by hand.
TEST(CompareDigestTest, VerdictTextStatesWhatWasMeasured) {
  ScratchDir dir;
  const std::vector<float> a{1.0f, 2.0f, -4.0f, 0.0f};
  const std::vector<float> b{1.0f, 2.5f, -4.0f, 0.0f};
  auto rec = [&](const std::string& path, const std::vector<float>& v) {
    RecordWriter w(path);
    w.write(1, "loss", TensorData::from_f32("lm", {}, {2.5f}));
    w.write(1, "grad", TensorData::from_f32("w", {2, 2}, v));
    w.commit();
  };
  rec(dir.file("a.h5"), a);
  rec(dir.file("b.h5"), b);
  rec(dir.file("a2.h5"), a);
  // |2 − 2.5| = 0.5 against a limit of 0.25 + 0.1 · 2.5 = 0.5: 100 % of it used.
  CompareResult r = compare(dir.file("a.h5"), dir.file("b.h5"), "tol:0.1,0.25");
  EXPECT_TRUE(r.holds());
  EXPECT_EQ(verdict_text(r),
            "within tol:0.1,0.25 (2 tensors): 1 elements differ in bits, max |diff| 0.5, max "
            "|diff|/|b| 0.2, max ULP 2097152; 100% of the limit used (headroom 0%)");
  // 2.0f and 2.5f are 2^21 float32 steps apart: a quarter of ulp:8388608's limit.
  r = compare(dir.file("a.h5"), dir.file("b.h5"), "ulp:8388608");
  EXPECT_THAT(verdict_text(r), HasSubstr("25% of the limit used (headroom 75%)"));
  r = compare(dir.file("a.h5"), dir.file("a2.h5"), "tol:0.1,0.25");
  EXPECT_EQ(verdict_text(r), "bitwise equal (2 tensors, 2 of them by digest)");
  r = compare(dir.file("a.h5"), dir.file("b.h5"), "differ");
  EXPECT_EQ(verdict_text(r),
            "differ as expected: 1 of 2 tensors differ in bits, first step 1 grad/w[0, 1]: a=2 "
            "(0x40000000) b=2.5 (0x40200000); 1 elements differ, max |diff| 0.5, max ULP 2097152");
  r = compare(dir.file("a.h5"), dir.file("a2.h5"), "differ");
  EXPECT_EQ(verdict_text(r),
            "FAILS differ: the records are bitwise equal (2 tensors, 2 of them by digest)");
}

TEST(CompareDigestTest, DigestOnlyAgainstFullComparesByDigest) {
  ScratchDir dir;
  const TensorData g = ramp("w", 3);
  write(dir.file("a.h5"), g, Storage::kFull);
  write(dir.file("b.h5"), g, Storage::kDigest);
  const CompareResult r = compare(dir.file("a.h5"), dir.file("b.h5"), "bitwise");
  EXPECT_TRUE(r.equal);
  EXPECT_EQ(r.tensors_by_digest, 2);
  EXPECT_THAT(format_report(r, "a", "b"), HasSubstr("decided by digests alone"));
}

TEST(CompareDigestTest, ValuesAreComparedAcrossChunkBoundaries) {
  ScratchDir dir;
  // 160 rows of 32768 floats: 20 MiB, two chunks of kChunkBytes and a remainder.
  TensorData g = ramp("w", 160);
  write(dir.file("a.h5"), g, Storage::kFull);
  const int64_t second_chunk = static_cast<int64_t>(kChunkBytes / 4) + 3;
  flip_last_bit(g, second_chunk);
  flip_last_bit(g, second_chunk + 7);
  write(dir.file("b.h5"), g, Storage::kFull);
  const CompareResult r = compare(dir.file("a.h5"), dir.file("b.h5"), "bitwise");
  ASSERT_TRUE(r.first_divergence);
  const TensorDiff& d = *r.first_divergence;
  EXPECT_EQ(d.first_index, second_chunk);
  EXPECT_EQ(d.first_coord,
            (std::vector<int64_t>{second_chunk / (kBlock / 2), second_chunk % (kBlock / 2)}));
  EXPECT_EQ(d.mismatches, 2);
  EXPECT_EQ(d.max_ulp, 1u);
  EXPECT_EQ(compare(dir.file("a.h5"), dir.file("b.h5"), "ulp:1").equal, true);
}

}  // namespace
}  // namespace mtp::compare
