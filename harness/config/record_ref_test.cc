// Tests of parse_record_ref: "REC.h5[:STEP]" as [training] init_from, --init-from, --resume and
// replay read it.
#include "harness/config/record_ref.h"

#include <gtest/gtest.h>

#include <string>

#include "harness/common/error.h"

namespace mtp::config {
namespace {

std::string error_of(const std::string& text, int64_t default_step) {
  try {
    parse_record_ref(text, default_step);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RecordRefTest, PathAndStep) {
  const RecordRef a = parse_record_ref("runs/default/ref_p4v2.h5:2", 0);
  EXPECT_EQ(a.path, "runs/default/ref_p4v2.h5");
  EXPECT_EQ(a.step, 2);
  EXPECT_EQ(a.text(), "runs/default/ref_p4v2.h5:2");
  const RecordRef b = parse_record_ref("rec.h5", 0);
  EXPECT_EQ(b.path, "rec.h5");
  EXPECT_EQ(b.step, 0);
  EXPECT_EQ(parse_record_ref("rec.h5:000", 5).step, 0);
  EXPECT_EQ(parse_record_ref("rec.h5:1000000", 0).step, 1000000);
}

TEST(RecordRefTest, AColonInsideThePathIsNotAStep) {
  const RecordRef r = parse_record_ref("a:b/rec.h5", 3);
  EXPECT_EQ(r.path, "a:b/rec.h5");
  EXPECT_EQ(r.step, 3);
}

TEST(RecordRefTest, BadStepsAndPathsNameTheRule) {
  EXPECT_EQ(error_of("rec.h5:", 0),
            "\"rec.h5:\": the step after ':' is empty (expected "
            "REC.h5[:STEP])");
  EXPECT_EQ(error_of("rec.h5:-1", 0),
            "\"rec.h5:-1\": step \"-1\" must be an integer in "
            "[0, 1000000] (expected REC.h5[:STEP])");
  EXPECT_EQ(error_of("rec.h5:x", -1),
            "\"rec.h5:x\": step \"x\" must be an integer in "
            "[0, 1000000] (expected REC.h5:STEP)");
  EXPECT_NE(error_of("rec.h5:1000001", 0).find("must be an integer in [0, 1000000]"),
            std::string::npos);
  EXPECT_EQ(error_of(":3", 0), "\":3\": the record path is empty (expected REC.h5[:STEP])");
  EXPECT_EQ(error_of("", 0), "\"\": the record path is empty (expected REC.h5[:STEP])");
  EXPECT_EQ(error_of("rec.h5", -1), "\"rec.h5\": give the step (expected REC.h5:STEP)");
}

}  // namespace
}  // namespace mtp::config
