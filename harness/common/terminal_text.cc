#include "harness/common/terminal_text.h"

#include <fmt/format.h>

#include <iostream>
#include <sstream>

namespace mtp {

void ControlEscapingStreambuf::emit(const std::string& s) {
  dest_->sputn(s.data(), static_cast<std::streamsize>(s.size()));
}

void ControlEscapingStreambuf::put(unsigned char c) {
  if (pending_c2_) {
    pending_c2_ = false;
    if (c >= 0x80 && c <= 0x9F) {
      emit(fmt::format("\\u00{:02x}", c));
      return;
    }
    dest_->sputc(static_cast<char>(0xC2));
  }
  if (c == 0xC2) {
    pending_c2_ = true;
  } else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
    emit(fmt::format("\\x{:02x}", c));
  } else {
    dest_->sputc(static_cast<char>(c));
  }
}

ControlEscapingStreambuf::int_type ControlEscapingStreambuf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  put(static_cast<unsigned char>(traits_type::to_char_type(c)));
  return c;
}

std::streamsize ControlEscapingStreambuf::xsputn(const char* s, std::streamsize n) {
  std::streamsize plain = 0;  // a run of bytes that pass unchanged goes out in one call
  auto flush_plain = [&](std::streamsize end) {
    if (plain < end) dest_->sputn(s + plain, end - plain);
  };
  for (std::streamsize i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool special =
        pending_c2_ || c == 0xC2 || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7F;
    if (special) {
      flush_plain(i);
      put(c);
      plain = i + 1;
    }
  }
  flush_plain(n);
  return n;
}

int ControlEscapingStreambuf::sync() {
  // A held 0xC2 stays held: the next byte decides what it was.
  return dest_->pubsync();
}

std::string escape_terminal_controls(const std::string& text) {
  std::ostringstream out;
  ControlEscapingStreambuf buf(out.rdbuf());
  buf.sputn(text.data(), static_cast<std::streamsize>(text.size()));
  buf.sputc('\n');  // releases a trailing 0xC2
  std::string s = out.str();
  s.pop_back();
  return s;
}

namespace {
std::streambuf* g_raw_stderr = nullptr;
}  // namespace

void install_terminal_escaping() {
  if (g_raw_stderr != nullptr) return;
  // Leaked on purpose: std::cout and std::cerr are used until the process exits.
  g_raw_stderr = std::cerr.rdbuf();
  std::cout.rdbuf(new ControlEscapingStreambuf(std::cout.rdbuf()));
  std::cerr.rdbuf(new ControlEscapingStreambuf(g_raw_stderr));
}

std::ostream& raw_stderr() {
  static std::ostream raw(nullptr);
  raw.rdbuf(g_raw_stderr != nullptr ? g_raw_stderr : std::cerr.rdbuf());
  return raw;
}

}  // namespace mtp
