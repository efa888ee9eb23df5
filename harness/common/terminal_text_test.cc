#include "harness/common/terminal_text.h"

#include <gtest/gtest.h>

#include <sstream>

namespace mtp {
namespace {

TEST(TerminalTextTest, EscapesC0ControlsButNewlineAndTab) {
  EXPECT_EQ(escape_terminal_controls("a\x1b[31mred\x07\r\n\tb\x7f"),
            "a\\x1b[31mred\\x07\\x0d\n\tb\\x7f");
}

TEST(TerminalTextTest, EscapesC1ControlsAsJsonValidUnicodeEscapes) {
  // U+009B (CSI) is C2 9B in UTF-8; U+00E9 (é, C3 A9) and U+00A0 (C2 A0) are not controls.
  EXPECT_EQ(escape_terminal_controls("x\xc2\x9b"
                                     "31m\xc3\xa9\xc2\xa0"),
            "x\\u009b31m\xc3\xa9\xc2\xa0");
  EXPECT_EQ(escape_terminal_controls("end\xc2"), "end\xc2");  // a lone trailing C2 passes
}

TEST(TerminalTextTest, StreamWritesInPiecesGiveTheSameBytes) {
  std::ostringstream sink;
  ControlEscapingStreambuf buf(sink.rdbuf());
  std::ostream out(&buf);
  out << "a\xc2";  // the C2 is held until the next byte decides
  out << "\x85"
      << "b";  // U+0085 (NEL): escaped
  out.put('\x1b');
  out << "ok\n";
  EXPECT_EQ(sink.str(), "a\\u0085b\\x1bok\n");
}

}  // namespace
}  // namespace mtp
