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

TEST(Utf8Test, PrintableExcerptCutsLongValuesAtWholeSequences) {
  EXPECT_EQ(printable_excerpt("short", 80), "short");
  EXPECT_EQ(printable_excerpt(std::string(1000, 'x'), 4), "xxxx... (1000 bytes in all)");
  // "λ" is two bytes: a cut at 4 bytes keeps "aλ" (3 bytes) and does not split the second "λ".
  EXPECT_EQ(printable_excerpt("aλλb", 4), "aλ... (6 bytes in all)");
  EXPECT_EQ(printable_excerpt("a\nbcdef", 3), "a\\x0ab... (7 bytes in all)");
  EXPECT_EQ(printable_excerpt("\xff\xfe\xfd", 2), "\\xff\\xfe... (3 bytes in all)");
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
