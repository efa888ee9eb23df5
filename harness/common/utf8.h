// File: harness/common/utf8.h
//
// UTF-8 checks for text that ends up in JSON reports (nlohmann::json refuses invalid UTF-8) and
// escaping for messages that quote bytes a terminal cannot show.
// Example: is_valid_utf8("r\xff.json") == false; printable("r\xff.json") == "r\\xff.json".
#pragma once

#include <string>
#include <string_view>

namespace mtp {

/// True iff `text` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool is_valid_utf8(std::string_view text);

/// `text` with every byte that is not part of a well-formed UTF-8 sequence, and every ASCII
/// control character, written as \xNN (a backslash itself stays as it is).
std::string printable(std::string_view text);

/// printable(text) when `text` has at most `max_bytes` bytes; otherwise printable() of its first
/// `max_bytes` bytes (never cutting a UTF-8 sequence) followed by "... (N bytes in all)", so that
/// a message quoting a user's value (an environment variable, a flag) stays readable however long
/// the value. Example: printable_excerpt(std::string(1000, 'x'), 4) == "xxxx... (1000 bytes in
/// all)".
std::string printable_excerpt(std::string_view text, size_t max_bytes = 80);

/// Throws InputError "<what> <printable(text)>: is not valid UTF-8 (<why>)" unless `text` is valid
/// UTF-8; `why` says what needs it (e.g. "the JSON report holds it").
void require_utf8(std::string_view what, std::string_view text, std::string_view why);

}  // namespace mtp
