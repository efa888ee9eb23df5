// File: harness/layout/internal.h
//
// Internals of harness_layout shared by its .cc files (not part of the public API): the parse
// result with the source position of every expanded item, and the helpers that format the parts
// of an error message (the quoted layout, a character).
#pragma once

#include <string>
#include <vector>

namespace mtp::layout::internal {

/// The longest expanded layout (items plus `|`) the parser builds before it gives up.
inline constexpr int kMaxExpandedLength = 100000;

/// One stage of the expanded layout, each item with the 0-based position in the string as given
/// of the character it was expanded from.
struct SourcedStage {
  std::string items;           ///< over {E, t, m, L}
  std::vector<int> positions;  ///< positions[j] is the source position of items[j]
};

/// The grammar pass with source positions (see parse_layout in layout.h).
std::vector<SourcedStage> parse_sourced(const std::string& text);

/// `layout "<text>"`, with unprintable bytes escaped and very long strings shortened.
std::string quote_layout(const std::string& text);

/// `'c'`, or an escape such as `'\x07'` for an unprintable byte.
std::string describe_char(char c);

}  // namespace mtp::layout::internal
