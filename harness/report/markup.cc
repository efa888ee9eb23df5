// Escaping, shortening and width estimates of report text (markup.h).

#include "harness/report/markup.h"

namespace mtp::report::markup {
namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

/// Byte offset of the start of character `n` of `text` (text.size() when it has fewer).
size_t offset_of_char(std::string_view text, size_t n) {
  size_t i = 0;
  for (size_t seen = 0; i < text.size(); ++i) {
    if (is_continuation(text[i])) continue;
    if (seen++ == n) return i;
  }
  return text.size();
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

size_t char_count(std::string_view text) {
  size_t n = 0;
  for (char c : text) n += is_continuation(c) ? 0 : 1;
  return n;
}

std::string shorten(std::string_view text, size_t max_chars) {
  const size_t n = char_count(text);
  if (n <= max_chars) return std::string(text);
  if (max_chars == 0) return "";
  const size_t keep = max_chars - 1;  // one character for the ellipsis
  const size_t head = (keep + 1) / 2, tail = keep - head;
  return std::string(text.substr(0, offset_of_char(text, head))) + "\u2026" +
         std::string(text.substr(offset_of_char(text, n - tail)));
}

double text_width(std::string_view text, double font_px, bool monospace) {
  return static_cast<double>(char_count(text)) * font_px * (monospace ? 0.6 : 0.56);
}

}  // namespace mtp::report::markup
