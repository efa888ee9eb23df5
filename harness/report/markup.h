// File: harness/report/markup.h
//
// Text helpers for the HTML report (html.cc) and its inline SVG: escaping of every user-controlled
// string, shortening long names for labels, and estimating a label's rendered width.
// Example: escape("<a href='x'>&") == "&lt;a href=&#39;x&#39;&gt;&amp;".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mtp::report::markup {

/// `text` with &, <, >, " and ' replaced by character references: safe as element content and
/// inside a quoted attribute value, in HTML and in inline SVG.
std::string escape(std::string_view text);

/// The number of characters (UTF-8 code points) of `text`.
size_t char_count(std::string_view text);

/// `text` itself when it has at most `max_chars` characters, else its start and end joined by
/// "…" (max_chars characters in all, never splitting a UTF-8 sequence). Not escaped.
std::string shorten(std::string_view text, size_t max_chars);

/// Estimated width in pixels of `text` rendered at `font_px` (monospace: 0.6 em per character;
/// proportional sans-serif: 0.56 em, a slight overestimate so labels never overlap).
double text_width(std::string_view text, double font_px, bool monospace);

}  // namespace mtp::report::markup
