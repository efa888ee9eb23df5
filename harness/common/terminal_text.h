// File: harness/common/terminal_text.h
//
// Nothing the tool prints can drive the terminal: file names, include patterns, layout strings
// and benchmark names come from the user or from files, and an ESC or C1 byte among them would
// be a terminal escape sequence (colours, cursor moves, window titles, OSC 52 clipboard
// writes). install_terminal_escaping() wraps std::cout and std::cerr so every control
// character other than newline and tab reaches the terminal escaped, and raw_stderr() keeps the
// one deliberate sequence (the progress line's "\r\033[K") available.
//
// Example:
//   install_terminal_escaping();           // first thing in main()
//   std::cout << "layout \x1b[31mX\n";       // prints: layout \x1b[31mX
//   raw_stderr() << "\r\033[K" << std::flush;  // a deliberate control sequence
#pragma once

#include <ostream>
#include <streambuf>
#include <string>

namespace mtp {

/// A streambuf that forwards to `dest`, writing each C0 control byte other than '\n' and '\t'
/// (and DEL) as the four characters "\xNN", and each C1 control (U+0080..U+009F, UTF-8
/// C2 80..C2 9F) as "\u00NN" — both readable, and the latter valid inside a JSON string, so
/// `info --json` stays valid JSON. Every other byte passes unchanged (invalid UTF-8 cannot form
/// an escape sequence). Unbuffered: each write reaches `dest` at once, in order.
class ControlEscapingStreambuf : public std::streambuf {
 public:
  explicit ControlEscapingStreambuf(std::streambuf* dest) : dest_(dest) {}
  std::streambuf* destination() const { return dest_; }

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  void put(unsigned char c);
  void emit(const std::string& s);
  std::streambuf* dest_;
  bool pending_c2_ = false;  ///< a 0xC2 byte held back until the next byte shows a C1 control
};

/// `text` as ControlEscapingStreambuf would print it.
std::string escape_terminal_controls(const std::string& text);

/// Wraps std::cout and std::cerr in ControlEscapingStreambuf (once; later calls do nothing).
void install_terminal_escaping();

/// Standard error without escaping, for the tool's own control sequences only.
std::ostream& raw_stderr();

}  // namespace mtp
