// Tests of the input-check macros: the message is built only when the check fails, and the error
// type is the one asked for.
#include "harness/common/error.h"

#include <gtest/gtest.h>

#include <string>

namespace mtp {
namespace {

class ModuleError : public InputError {
 public:
  explicit ModuleError(const std::string& msg) : InputError(msg) {}
};

TEST(ErrorTest, CheckThrowsInputErrorWithTheMessageOnlyWhenTheConditionFails) {
  int built = 0;
  auto message = [&built] {
    ++built;
    return std::string("model: hidden_size = 0 must be >= 1");
  };
  EXPECT_NO_THROW(MTP_CHECK(1 + 1 == 2, message()));
  EXPECT_EQ(built, 0);
  try {
    MTP_CHECK(1 + 1 == 3, message());
    ADD_FAILURE() << "no throw";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "model: hidden_size = 0 must be >= 1");
  }
  EXPECT_EQ(built, 1);
}

TEST(ErrorTest, CheckAsThrowsTheModulesError) {
  EXPECT_THROW(MTP_CHECK_AS(ModuleError, false, "bad layout"), ModuleError);
  // Inside an if without braces the macro is one statement.
  bool ran_else = false;
  if (false)
    MTP_CHECK(false, "never");
  else
    ran_else = true;
  EXPECT_TRUE(ran_else);
}

}  // namespace
}  // namespace mtp
