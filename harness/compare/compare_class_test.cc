#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/compare/compare.h"

namespace mtp::compare {
namespace {

using ::testing::HasSubstr;
using Kind = CompareClass::Kind;

TEST(CompareClassTest, ParsesTheFourForms) {
  EXPECT_EQ(CompareClass::parse("bitwise").kind, Kind::kBitwise);
  EXPECT_EQ(CompareClass::parse("differ").kind, Kind::kDiffer);

  CompareClass u = CompareClass::parse("ulp:4");
  EXPECT_EQ(u.kind, Kind::kUlp);
  EXPECT_EQ(u.max_ulp, 4);
  EXPECT_EQ(CompareClass::parse("ulp:0").max_ulp, 0);

  CompareClass t = CompareClass::parse("tol:1e-3,1e-6");
  EXPECT_EQ(t.kind, Kind::kTol);
  EXPECT_EQ(t.rtol, 1e-3);
  EXPECT_EQ(t.atol, 1e-6);
  CompareClass z = CompareClass::parse("tol:0,0.5");
  EXPECT_EQ(z.rtol, 0.0);
  EXPECT_EQ(z.atol, 0.5);

  CompareClass l = CompareClass::parse("rel_l2:0.125");
  EXPECT_EQ(l.kind, Kind::kRelL2);
  EXPECT_EQ(l.max_rel_l2, 0.125);
  EXPECT_TRUE(l.needs_values());
  EXPECT_FALSE(CompareClass::parse("bitwise").needs_values());
  EXPECT_FALSE(CompareClass::parse("differ").needs_values());
}

TEST(CompareClassTest, RejectsMalformedTextNamingTheAcceptedForms) {
  for (const char* bad : {"ulp:",
                          "ulp:-1",
                          "tol:1e-3",
                          "tol:a,b",
                          "bits",
                          "",
                          "Bitwise",
                          "ulp:1.5",
                          "ulp:+1",
                          "ulp: 1",
                          "ulp:99999999999999999999",
                          "tol:-1,0",
                          "tol:1,-0.5",
                          "tol:inf,0",
                          "tol:nan,0",
                          "tol:1,2,3",
                          "tol:,1",
                          "tol:1,",
                          "differ ",
                          "rel_l2:",
                          "rel_l2:-1",
                          "rel_l2:nan",
                          "rel_l2:inf",
                          "rel_l2:1,2",
                          "rel_l2",
                          "ulp"}) {
    SCOPED_TRACE(bad);
    try {
      CompareClass::parse(bad);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("'") + bad + "'"));
      EXPECT_THAT(e.what(), HasSubstr("bitwise, ulp:N"));
      EXPECT_THAT(e.what(), HasSubstr("tol:RTOL,ATOL"));
      EXPECT_THAT(e.what(), HasSubstr("differ"));
      EXPECT_THAT(e.what(), HasSubstr("rel_l2:B"));
    }
  }
}

TEST(CompareClassTest, ToStringRoundTrips) {
  for (const char* text : {"bitwise", "differ", "ulp:0", "ulp:17", "tol:0.001,1e-08", "tol:0,0",
                           "rel_l2:0.0039", "rel_l2:0"}) {
    CompareClass c = CompareClass::parse(text);
    EXPECT_EQ(c.to_string(), text);
    CompareClass again = CompareClass::parse(c.to_string());
    EXPECT_EQ(again.kind, c.kind);
    EXPECT_EQ(again.max_ulp, c.max_ulp);
    EXPECT_EQ(again.rtol, c.rtol);
    EXPECT_EQ(again.atol, c.atol);
    EXPECT_EQ(again.max_rel_l2, c.max_rel_l2);
  }
}

}  // namespace
}  // namespace mtp::compare
