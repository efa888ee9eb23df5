// Tests of evaluate (report.h) on hand-written records: a pair whose records are NaN alike fails
// naming the value (NaN equals NaN bit for bit), an expectation may allow it, a tolerance that
// the records cannot decide is skipped with the reason, and every rendering of a passing pair
// says what was measured (never "bitwise equal" for a tolerance pass).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <pugixml.hpp>

#include <cmath>
#include <limits>

#include "harness/common/test_util.h"
#include "harness/record/record.h"
#include "harness/report/report.h"

namespace mtp::report {
namespace {

using record::Storage;
using record::TensorData;
using ::testing::HasSubstr;
using ::testing::Not;

/// One step's loss and a grad of 4 floats.
void write(const std::string& path, float loss, const std::vector<float>& grad,
           Storage storage = Storage::kFull) {
  record::RecordWriter w(path);
  w.write(1, "loss", TensorData::from_f32("total", {}, {loss}));
  w.write(1, "grad", TensorData::from_f32("w", {2, 2}, grad), storage);
  w.commit();
}

scenario::Expectation expectation(const std::string& cls) {
  scenario::Expectation e;
  e.name = "e";
  e.variants = {"a", "b"};
  e.cls = compare::CompareClass::parse(cls);
  e.selection.groups = {"loss", "grad"};
  e.why = "test";
  return e;
}

class EvaluateTest : public ::testing::Test {
 protected:
  std::map<std::string, std::string> paths() const {
    return {{"a", dir_.file("a.h5")}, {"b", dir_.file("b.h5")}};
  }
  testing_util::ScratchDir dir_;
};

TEST_F(EvaluateTest, RecordsThatAreNaNAlikeFailNamingTheFirstNonFiniteValue) {
  // Bit for bit the same NaN in both records: the comparison alone calls them equal.
  write(dir_.file("a.h5"), NAN, {1, 2, 3, 4});
  write(dir_.file("b.h5"), NAN, {1, 2, 3, 4});
  const scenario::Expectation e = expectation("bitwise");
  const ExpectationResult r = evaluate(e, paths());
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_TRUE(r.pairs[0].result.equal) << "the records are bitwise equal";
  EXPECT_FALSE(r.holds);
  EXPECT_FALSE(r.pairs[0].holds);
  EXPECT_EQ(pair_verdict(r.pairs[0]),
            "non-finite value in a: step 1 loss/total[] = nan (0x7fc00000): 1 of its 1 elements "
            "and 1 tensor(s) of the record are not finite; b: step 1 loss/total[] = nan "
            "(0x7fc00000): 1 of its 1 elements and 1 tensor(s) of the record are not finite");
  EXPECT_THAT(format_table({r}), HasSubstr("FAIL   a vs b"));
  EXPECT_THAT(to_junit(scenario::Scenario{}, {r}), HasSubstr("<failure message=\"a vs b (bitwise): "
                                                             "non-finite value in a: step 1"));
  // The same under a tolerance (NaN is within any tolerance of NaN in the comparator).
  EXPECT_FALSE(evaluate(expectation("tol:1,1"), paths()).holds);
}

TEST_F(EvaluateTest, ANonFiniteValueInOneRecordFailsEvenWhereItIsNotSelected) {
  write(dir_.file("a.h5"), 2.5f, {1, 2, 3, 4});
  write(dir_.file("b.h5"), 2.5f, {1, 2, -INFINITY, 4});
  scenario::Expectation e = expectation("bitwise");
  e.selection.groups = {"loss"};  // the comparison sees only equal losses
  const ExpectationResult r = evaluate(e, paths());
  EXPECT_FALSE(r.holds);
  EXPECT_EQ(r.pairs[0].nonfinite,
            "b: step 1 grad/w[1, 0] = -inf (0xff800000): 1 of its 4 elements and 1 tensor(s) of "
            "the record are not finite");
  // allow_nonfinite opts out: the verdict is the comparison's again.
  e.allow_nonfinite = true;
  EXPECT_TRUE(evaluate(e, paths()).holds);
}

TEST_F(EvaluateTest, ATolerancePassSaysWhatItMeasuredInEveryRendering) {
  write(dir_.file("a.h5"), 2.5f, {1, 2, 3, 4});
  write(dir_.file("b.h5"), 2.5f, {1, 2, 3, 4.5f});
  const scenario::Expectation e = expectation("tol:0,1");
  const ExpectationResult r = evaluate(e, paths());
  ASSERT_TRUE(r.holds);
  const std::string measured =
      "within tol:0,1 (2 tensors): 1 elements differ in bits, max |diff| 0.5, max |diff|/|b| "
      "0.111, max ULP 1048576; 50% of the limit used (headroom 50%)";
  EXPECT_EQ(pair_verdict(r.pairs[0]), measured);
  EXPECT_THAT(format_table({r}), HasSubstr(measured));
  const std::string junit = to_junit(scenario::Scenario{}, {r});
  EXPECT_THAT(junit, HasSubstr("<system-out>" + measured + "</system-out>"));
  EXPECT_THAT(junit, Not(HasSubstr("bitwise equal")));
  EXPECT_EQ(to_json(scenario::Scenario{}, {}, {r})["expectations"][0]["pairs"][0]["verdict"],
            measured);
  EXPECT_THAT(to_html(scenario::Scenario{}, {}, {r}),
              HasSubstr("<div class=\"measured\">" + measured + "</div>"));
}

TEST_F(EvaluateTest, ATolerancePairWithoutTheValuesIsSkippedWithTheReason) {
  write(dir_.file("a.h5"), 2.5f, {1, 2, 3, 4}, Storage::kDigest);
  write(dir_.file("b.h5"), 2.5f, {1, 2, 3, 4.5f}, Storage::kDigest);
  const scenario::Expectation e = expectation("tol:0,1");  // results point at it
  const ExpectationResult r = evaluate(e, paths());
  EXPECT_TRUE(r.skipped);
  EXPECT_TRUE(r.undecided);
  EXPECT_FALSE(r.holds);
  EXPECT_THAT(r.skip_reason(), HasSubstr("undecided: UNDECIDED tol:0,1: the digests of 1 of 2 "
                                         "tensors differ"));
  EXPECT_THAT(format_table({r}), HasSubstr("SKIP   a vs b"));
  const std::string junit = to_junit(scenario::Scenario{}, {r});
  EXPECT_THAT(junit, HasSubstr("skipped=\"1\""));
  EXPECT_THAT(junit, HasSubstr("failures=\"0\""));
  EXPECT_EQ(to_json(scenario::Scenario{}, {}, {r})["expectations"][0]["status"], "skipped");
  // Bitwise is decided by the digests: a failure, not a skip.
  const ExpectationResult b = evaluate(expectation("bitwise"), paths());
  EXPECT_FALSE(b.skipped);
  EXPECT_FALSE(b.holds);
}

TEST_F(EvaluateTest, JUnitStaysWellFormedXmlWhatEverTheWhyHolds) {
  write(dir_.file("a.h5"), 1.0f, {1, 2, 3, 4});
  write(dir_.file("b.h5"), 2.0f, {1, 2, 3, 4});
  scenario::Expectation e = expectation("bitwise");
  // Control characters, the non-characters U+FFFE and U+FFFF, a byte of invalid UTF-8.
  e.why = std::string("bell\x07 esc\x1b[31m nul-free\x01 \xef\xbf\xbe\xef\xbf\xbf bad\xff end");
  const ExpectationResult r = evaluate(e, paths());
  ASSERT_FALSE(r.holds);
  const std::string junit = to_junit(scenario::Scenario{}, {r});
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_string(junit.c_str());
  ASSERT_TRUE(parsed) << parsed.description();
  const std::string text = doc.select_node("//failure").node().text().get();
  EXPECT_THAT(text, HasSubstr("bell\\x07 esc\\x1b[31m nul-free\\x01 \\uFFFE\\uFFFF bad\\xff end"));
  for (unsigned char c : junit) {
    EXPECT_TRUE(c >= 0x20 || c == '\n' || c == '\t' || c == '\r') << static_cast<int>(c);
  }
  EXPECT_THAT(junit, Not(HasSubstr("&#")));
}

}  // namespace
}  // namespace mtp::report
