#include "harness/compare/compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "harness/record/h5.h"
#include "harness/record/record_test_util.h"

namespace mtp::compare {
namespace {

using record::RecordReader;
using record::RecordWriter;
using record::TensorData;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace h5 = record::h5;
using record::testing_util::ScratchDir;

/// Changes (or drops, by returning false) one tensor before it is written.
using Edit = std::function<bool(int step, const std::string& group, TensorData& t)>;

/// Sets element `i` of float32 tensor `t` to `v`.
void set_f32(TensorData& t, size_t i, float v) { std::memcpy(t.bytes.data() + 4 * i, &v, 4); }

/// Sets the bits of element `i` of float32 tensor `t`.
void set_bits(TensorData& t, size_t i, uint32_t bits) {
  std::memcpy(t.bytes.data() + 4 * i, &bits, 4);
}

/// A small training record: step 0 initial weights; steps 1 and 2 with batch, loss, grad and
/// weight. Names are written "w_zeta" before "w_alpha" (creation order, not name order).
void write_record(const std::string& path, const Edit& edit = nullptr) {
  RecordWriter w(path);
  w.set_attr("layout", std::string("E|tt|L"));
  auto put = [&](int step, const std::string& group, TensorData t) {
    if (!edit || edit(step, group, t)) {
      w.write(step, group, t);
    }
  };
  auto weights = [&](int step, const std::string& group, float scale) {
    put(step, group,
        TensorData::from_f32("w_zeta", {2, 2}, {1 * scale, 2 * scale, 3 * scale, 4 * scale}));
    put(step, group, TensorData::from_f32("w_alpha", {3}, {0.5f * scale, -1 * scale, 0}));
  };
  weights(0, "weight", 1.0f);
  for (int step = 1; step <= 2; ++step) {
    put(step, "batch", TensorData::from_i32("tokens", {1, 1, 4}, {3, 1, 4, 1}));
    put(step, "loss", TensorData::from_f32("lm", {}, {2.5f / static_cast<float>(step)}));
    put(step, "loss", TensorData::from_f32("total", {}, {3.0f / static_cast<float>(step)}));
    weights(step, "grad", 0.25f * static_cast<float>(step));
    weights(step, "weight", 1.0f - 0.01f * static_cast<float>(step));
  }
  w.commit();
}

/// Two records: A as written by write_record, B with `edit` applied.
class CompareTest : public ::testing::Test {
 protected:
  void make(const Edit& edit_b, const Edit& edit_a = nullptr) {
    write_record(dir_.file("a.h5"), edit_a);
    write_record(dir_.file("b.h5"), edit_b);
  }
  /// Changes b.h5 in place through HDF5 (what h5py would do to a record).
  void edit_b(const std::function<void(const h5::Group& root)>& fn) {
    h5::ErrorSilencer quiet;
    h5::File f(H5Fopen(dir_.file("b.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose,
               h5::Where{dir_.file("b.h5")});
    ASSERT_TRUE(f.valid());
    fn(f.root());
  }
  CompareResult compare(const std::string& cls, const Selection& sel = Selection()) {
    RecordReader a(dir_.file("a.h5"));
    RecordReader b(dir_.file("b.h5"));
    return compare_records(a, b, CompareClass::parse(cls), sel);
  }

  ScratchDir dir_;
};

/// Edits element `i` of tensor (step, group, name) with `fn`.
Edit change(int step, const std::string& group, const std::string& name,
            std::function<void(TensorData&)> fn) {
  return [=](int s, const std::string& g, TensorData& t) {
    if (s == step && g == group && t.name == name) {
      fn(t);
    }
    return true;
  };
}

Edit drop(int step, const std::string& group, const std::string& name) {
  return [=](int s, const std::string& g, TensorData& t) {
    return !(s == step && (group.empty() || g == group) && (name.empty() || t.name == name));
  };
}

TEST_F(CompareTest, IdenticalRecordsAreEqual) {
  make(nullptr);
  CompareResult r = compare("bitwise");
  EXPECT_TRUE(r.equal);
  EXPECT_TRUE(r.holds());
  EXPECT_TRUE(r.structural.empty());
  EXPECT_FALSE(r.first_divergence);
  // Default groups loss, grad, weight: step 0 has 2 weights, steps 1 and 2 have 2+2+2.
  EXPECT_EQ(r.tensors_compared, 14);
  ASSERT_EQ(r.tensors.size(), 14u);
  for (const TensorDiff& d : r.tensors) {
    EXPECT_EQ(d.mismatches, 0) << d.describe();
    EXPECT_EQ(d.bit_mismatches, 0);
    EXPECT_TRUE(d.structural.empty());
  }
  // Canonical order: steps ascending, groups loss, grad, weight, names in creation order.
  EXPECT_EQ(r.tensors[0].describe(), "step 0 weight/w_zeta: bitwise equal");
  EXPECT_EQ(r.tensors[1].name, "w_alpha");
  EXPECT_EQ(r.tensors[2].group, "loss");
  EXPECT_EQ(r.tensors[2].name, "lm");
  EXPECT_EQ(r.tensors[4].group, "grad");
  EXPECT_EQ(r.tensors[13].step, 2);
  EXPECT_THAT(format_report(r, "a.h5", "b.h5"),
              StartsWith("EQUAL (bitwise): A = a.h5, B = b.h5\n"));

  CompareResult differ = compare("differ");
  EXPECT_TRUE(differ.equal);
  EXPECT_FALSE(differ.holds());
  EXPECT_THAT(format_report(differ, "a", "b"), HasSubstr("negative control FAILS"));
}

TEST_F(CompareTest, PlusZeroVersusMinusZero) {
  make(change(1, "grad", "w_alpha", [](TensorData& t) { set_f32(t, 2, -0.0f); }));
  CompareResult bw = compare("bitwise");
  EXPECT_FALSE(bw.equal);
  ASSERT_TRUE(bw.first_divergence);
  EXPECT_EQ(bw.first_divergence->describe(),
            "step 1 grad/w_alpha[2]: a=0 (0x00000000) b=-0 (0x80000000)");
  EXPECT_EQ(bw.first_divergence->max_ulp, 0u);
  CompareResult ulp = compare("ulp:0");
  EXPECT_TRUE(ulp.equal);
  EXPECT_TRUE(ulp.holds());
  EXPECT_FALSE(ulp.first_divergence);
  EXPECT_TRUE(compare("tol:0,0").equal);
  EXPECT_TRUE(compare("differ").holds());
}

TEST_F(CompareTest, NaNWithTheSameBitsIsEqual) {
  auto nan = [](TensorData& t) { set_bits(t, 0, 0x7fc00123u); };
  make(change(2, "weight", "w_zeta", nan), change(2, "weight", "w_zeta", nan));
  EXPECT_TRUE(compare("bitwise").equal);
  EXPECT_TRUE(compare("ulp:0").equal);
  EXPECT_TRUE(compare("tol:0,0").equal);
}

TEST_F(CompareTest, NaNWithAnotherPayloadDiffersBitwise) {
  make(change(2, "weight", "w_zeta", [](TensorData& t) { set_bits(t, 0, 0x7fc00124u); }),
       change(2, "weight", "w_zeta", [](TensorData& t) { set_bits(t, 0, 0x7fc00123u); }));
  CompareResult r = compare("bitwise");
  EXPECT_FALSE(r.equal);
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->describe(),
            "step 2 weight/w_zeta[0, 0]: a=nan (0x7fc00123) b=nan (0x7fc00124)");
}

TEST_F(CompareTest, NaNVersusOneDiffersUnderEveryClass) {
  make(change(1, "loss", "lm", [](TensorData& t) { set_f32(t, 0, 1.0f); }),
       change(1, "loss", "lm", [](TensorData& t) { set_bits(t, 0, 0x7fc00000u); }));
  for (const char* cls : {"bitwise", "ulp:1000000000", "tol:1e9,1e9"}) {
    SCOPED_TRACE(cls);
    CompareResult r = compare(cls);
    EXPECT_FALSE(r.equal);
    EXPECT_FALSE(r.holds());
    ASSERT_TRUE(r.first_divergence);
    EXPECT_EQ(r.first_divergence->describe(),
              "step 1 loss/lm: a=nan (0x7fc00000) b=1 (0x3f800000)");
    EXPECT_EQ(r.first_divergence->max_ulp, std::numeric_limits<uint64_t>::max());
  }
  EXPECT_TRUE(compare("differ").holds());
}

TEST_F(CompareTest, OneUlpChange) {
  make(change(1, "grad", "w_zeta", [](TensorData& t) {
    set_f32(t, 2, std::nextafter(0.75f, 1.0f));  // element [1, 0] = 3 × 0.25
  }));
  CompareResult r = compare("bitwise");
  EXPECT_FALSE(r.equal);
  ASSERT_TRUE(r.first_divergence);
  const TensorDiff& d = *r.first_divergence;
  EXPECT_EQ(d.step, 1);
  EXPECT_EQ(d.group, "grad");
  EXPECT_EQ(d.name, "w_zeta");
  EXPECT_EQ(d.first_index, 2);
  EXPECT_THAT(d.first_coord, ElementsAre(1, 0));
  EXPECT_EQ(d.a_value, "0.75");
  EXPECT_EQ(d.b_value, "0.75000005960464478");
  EXPECT_EQ(d.a_bits, "0x3f400000");
  EXPECT_EQ(d.b_bits, "0x3f400001");
  EXPECT_EQ(d.max_ulp, 1u);
  EXPECT_EQ(d.mismatches, 1);
  EXPECT_EQ(d.numel, 4);
  EXPECT_EQ(d.describe(),
            "step 1 grad/w_zeta[1, 0]: a=0.75 (0x3f400000) b=0.75000005960464478 (0x3f400001)");
  std::string report = format_report(r, "runs/a.h5", "runs/b.h5");
  EXPECT_THAT(report, StartsWith("DIFFERENT (bitwise): A = runs/a.h5, B = runs/b.h5\n"));
  EXPECT_THAT(report, HasSubstr("first divergence: step 1 grad/w_zeta[1, 0]: a=0.75 (0x3f400000) "
                                "b=0.75000005960464478 (0x3f400001)\n"));
  EXPECT_THAT(report, HasSubstr("1 of 4 elements outside bitwise, max ULP 1"));
  EXPECT_THAT(report, HasSubstr("grad/w_zeta"));

  CompareResult ulp1 = compare("ulp:1");
  EXPECT_TRUE(ulp1.equal);
  EXPECT_EQ(ulp1.tensors[4].bit_mismatches, 1);  // step 1 grad/w_zeta, within the class
  EXPECT_EQ(ulp1.tensors[4].mismatches, 0);
  EXPECT_FALSE(compare("ulp:0").equal);
  EXPECT_TRUE(compare("differ").holds());
}

TEST_F(CompareTest, ShapeChangeIsStructural) {
  make(change(1, "weight", "w_zeta", [](TensorData& t) { t.shape = {4}; }));
  for (const char* cls : {"bitwise", "ulp:1000", "tol:1e9,1e9"}) {
    SCOPED_TRACE(cls);
    CompareResult r = compare(cls);
    EXPECT_FALSE(r.equal);
    ASSERT_TRUE(r.first_divergence);
    EXPECT_EQ(r.first_divergence->structural, "shape [2, 2] in A, [4] in B");
    EXPECT_EQ(r.first_divergence->describe(), "step 1 weight/w_zeta: shape [2, 2] in A, [4] in B");
    EXPECT_EQ(r.tensors_compared, 13);
  }
  EXPECT_TRUE(compare("differ").holds());
}

TEST_F(CompareTest, DTypeChangeIsStructural) {
  make([](int s, const std::string& g, TensorData& t) {
    if (s == 2 && g == "grad" && t.name == "w_alpha") {
      t = TensorData::from_f64("w_alpha", {3}, {0.5 * 0.5, -1 * 0.5, 0});
    }
    return true;
  });
  CompareResult r = compare("tol:1,1");
  EXPECT_FALSE(r.equal);
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->describe(),
            "step 2 grad/w_alpha: dtype float32 in A, float64 in B");
}

TEST_F(CompareTest, MissingTensorInEitherRecord) {
  make(drop(2, "weight", "w_zeta"));
  CompareResult r = compare("bitwise");
  EXPECT_FALSE(r.equal);
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->describe(), "step 2 weight/w_zeta: only in A");
  EXPECT_EQ(r.first_divergence->numel, 4);

  make(nullptr, drop(1, "loss", "total"));
  r = compare("bitwise");
  EXPECT_FALSE(r.equal);
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->describe(), "step 1 loss/total: only in B");
}

TEST_F(CompareTest, MissingStepOrGroup) {
  make(drop(2, "", ""));
  CompareResult r = compare("bitwise");
  EXPECT_FALSE(r.equal);
  EXPECT_THAT(r.structural, ElementsAre("step 2: step only in A (6 selected tensors)"));
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->describe(), "step 2: step only in A (6 selected tensors)");
  EXPECT_TRUE(compare("differ").holds());
  EXPECT_THAT(format_report(r, "a", "b"),
              HasSubstr("step/group differences:\n  step 2: step only"));

  make(drop(1, "loss", ""));
  r = compare("ulp:5");
  EXPECT_FALSE(r.equal);
  EXPECT_THAT(r.structural, ElementsAre("step 1 loss: group only in A (2 selected tensors)"));
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->group, "loss");
  EXPECT_TRUE(r.first_divergence->name.empty());

  // A step missing from B is a difference even when nothing selected is in it.
  make(drop(0, "", ""));
  Selection loss_only;
  loss_only.groups = {"loss"};
  r = compare("bitwise", loss_only);
  EXPECT_FALSE(r.equal);
  EXPECT_THAT(r.structural, ElementsAre("step 0: step only in A (0 selected tensors)"));
  EXPECT_FALSE(compare("bitwise").equal);
  // ... but not when the step selection leaves it out.
  loss_only.steps = {1, 2};
  EXPECT_TRUE(compare("bitwise", loss_only).equal);
}

// Defect: `compare` said EQUAL when B had an extra, empty step group (h5py
// create_group('steps/000004')), while `info` listed step 4.
TEST_F(CompareTest, ExtraEmptyStepOrGroupIsAStructuralDifference) {
  make(nullptr);
  edit_b([](const h5::Group& root) { root.open_group("steps").create_group("000004"); });
  CompareResult r = compare("bitwise");
  EXPECT_FALSE(r.equal);
  EXPECT_THAT(r.structural, ElementsAre("step 4: step only in B (0 selected tensors)"));
  EXPECT_FALSE(compare("ulp:100").holds());
  EXPECT_TRUE(compare("differ").holds());
}

TEST_F(CompareTest, ExtraEmptyGroupIsAStructuralDifference) {
  make(nullptr);
  edit_b([](const h5::Group& root) {
    root.open_group("steps").open_group("000000").create_group("grad");
  });
  CompareResult r = compare("bitwise");
  EXPECT_FALSE(r.equal);
  EXPECT_THAT(r.structural, ElementsAre("step 0 grad: group only in B (0 selected tensors)"));
  Selection weights;
  weights.groups = {"weight"};
  EXPECT_TRUE(compare("bitwise", weights).equal) << "a group outside the selection";
}

TEST_F(CompareTest, FirstDivergenceIsFirstInCanonicalOrder) {
  auto bump = [](TensorData& t) { set_f32(t, 0, 100.0f); };
  auto edits = [&](bool with_grad) -> Edit {
    return [=](int s, const std::string& g, TensorData& t) {
      if ((s == 2 && g == "loss" && t.name == "lm") ||
          (s == 1 && g == "weight" && t.name == "w_alpha") ||
          (with_grad && s == 1 && g == "grad" && t.name == "w_alpha")) {
        bump(t);
      }
      return true;
    };
  };
  make(edits(false));
  CompareResult r = compare("bitwise");
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->step, 1);
  EXPECT_EQ(r.first_divergence->group, "weight");
  int failing = 0;
  for (const TensorDiff& d : r.tensors) {
    failing += d.failed() ? 1 : 0;
  }
  EXPECT_EQ(failing, 2);

  make(edits(true));
  r = compare("bitwise");
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->step, 1);
  EXPECT_EQ(r.first_divergence->group, "grad");
  EXPECT_EQ(r.first_divergence->name, "w_alpha");

  // Within a group, A's creation order: w_zeta (written first) before w_alpha.
  make([&](int s, const std::string& g, TensorData& t) {
    if (s == 1 && g == "grad") {
      bump(t);
    }
    return true;
  });
  r = compare("bitwise");
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->name, "w_zeta");
}

TEST_F(CompareTest, SelectionIsHonoured) {
  make([](int s, const std::string& g, TensorData& t) {
    if ((s == 2 && g == "grad" && t.name == "w_alpha") || (s == 1 && g == "batch")) {
      set_bits(t, 0, 12345u);
    }
    return true;
  });
  EXPECT_FALSE(compare("bitwise").equal);

  Selection exclude;
  exclude.exclude = {"*alpha"};
  CompareResult r = compare("bitwise", exclude);
  EXPECT_TRUE(r.equal);
  EXPECT_EQ(r.tensors_compared, 9);

  Selection include;
  include.include = {"w_*"};
  r = compare("bitwise", include);
  EXPECT_FALSE(r.equal);
  EXPECT_EQ(r.tensors_compared, 10);

  Selection step1;
  step1.steps = {0, 1};
  EXPECT_TRUE(compare("bitwise", step1).equal);

  Selection loss_weight;
  loss_weight.groups = {"weight", "loss"};
  EXPECT_TRUE(compare("bitwise", loss_weight).equal);

  Selection batch;
  batch.groups = {"batch"};
  r = compare("ulp:100", batch);
  EXPECT_FALSE(r.equal);
  ASSERT_TRUE(r.first_divergence);
  EXPECT_EQ(r.first_divergence->describe(),
            "step 1 batch/tokens[0, 0, 0]: a=3 (0x00000003) b=12345 (0x00003039)");
}

TEST_F(CompareTest, SelectionErrors) {
  make(nullptr);
  Selection bad_group;
  bad_group.groups = {"grads"};
  try {
    compare("bitwise", bad_group);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown group 'grads'"));
  }

  Selection nothing;
  nothing.include = {"no_such_tensor*"};
  try {
    compare("bitwise", nothing);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nothing to compare"));
    EXPECT_THAT(e.what(), HasSubstr("no_such_tensor*"));
  }

  Selection absent_step;
  absent_step.steps = {1, 7};
  CompareResult r = compare("bitwise", absent_step);
  EXPECT_FALSE(r.equal);
  EXPECT_THAT(r.structural, ElementsAre("step 7: selected step is in neither record"));
}

TEST_F(CompareTest, ReportRowsAreLimited) {
  make([](int s, const std::string& g, TensorData& t) {
    if (g != "batch") {
      set_bits(t, 0, 0x40000000u);
    }
    return true;
  });
  CompareResult r = compare("bitwise");
  std::string report = format_report(r, "a", "b", 3);
  EXPECT_THAT(report, HasSubstr("... 11 more failing tensors"));
  EXPECT_THAT(report, HasSubstr("14 tensors checked, 14 compared by value; 14 failing tensors"));
  EXPECT_THAT(report, HasSubstr("mismatches/numel"));
  EXPECT_THAT(report, HasSubstr("1/4"));
}

}  // namespace
}  // namespace mtp::compare
