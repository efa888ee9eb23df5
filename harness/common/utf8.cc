#include "harness/common/utf8.h"

#include <algorithm>

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp {
namespace {

/// Length of the well-formed UTF-8 sequence starting at text[i], or 0 when there is none.
size_t sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // no overlong forms
    if (c == 0xF4) hi = 0x8F;  // at most U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequence_length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string printable(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequence_length(text, i);
    const auto c = static_cast<unsigned char>(text[i]);
    if (n == 0 || c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string printable_excerpt(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return printable(text);
  size_t cut = 0;  // the longest prefix of whole sequences (or single invalid bytes) that fits
  while (cut < text.size()) {
    const size_t n = std::max<size_t>(sequence_length(text, cut), 1);
    if (cut + n > max_bytes) break;
    cut += n;
  }
  return fmt::format("{}... ({} bytes in all)", printable(text.substr(0, cut)), text.size());
}

void require_utf8(std::string_view what, std::string_view text, std::string_view why) {
  if (!is_valid_utf8(text)) {
    throw InputError(fmt::format("{} {}: is not valid UTF-8 ({})", what, printable(text), why));
  }
}

}  // namespace mtp
