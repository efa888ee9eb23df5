#include "harness/common/utf8.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/common/error.h"

namespace mtp {
namespace {

using ::testing::HasSubstr;

TEST(Utf8Test, AcceptsWellFormedAndRejectsMalformedSequences) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("runs/default/report.json"));
  EXPECT_TRUE(is_valid_utf8("λ = 0.1 → ∞ \xf0\x9f\x99\x82"));  // 2-, 3- and 4-byte forms
  EXPECT_FALSE(is_valid_utf8("r\xff.json"));
  EXPECT_FALSE(is_valid_utf8("\xc3"));              // truncated
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\x80"));              // lone continuation byte
}

TEST(Utf8Test, PrintableEscapesInvalidBytesAndControls) {
  EXPECT_EQ(printable("r\xff.json"), "r\\xff.json");
  EXPECT_EQ(printable("a\nb"), "a\\x0ab");
  EXPECT_EQ(printable("λ"), "λ");
}

TEST(Utf8Test, RequireUtf8NamesTheTextAndTheReason) {
  EXPECT_NO_THROW(require_utf8("--out", "runs/x", "the report holds it"));
  try {
    require_utf8("--out", "d\xff", "the JSON report holds it");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--out d\\xff: is not valid UTF-8 (the JSON report holds it)"));
  }
}

}  // namespace
}  // namespace mtp
