// File: harness/layout/parse.cc
//
// The grammar pass over a layout string (spec megatron_mtp_standalone.md §2.1–2.2): commas are
// removed, `(group)*n` and `c*n` are expanded, and the result is split on `|`. Unlike Megatron,
// which rewrites the string with regular expressions, this is a single left-to-right scan that
// keeps the source position of every character, so that each error names the position in the
// string as given. Deliberately stricter than Megatron's regular expressions: a repeat count
// cannot itself be repeated (`t*2*3`, `(t|)*2*3`), and a group must not be empty.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "harness/layout/internal.h"
#include "harness/layout/layout.h"

namespace mtp::layout {
namespace internal {
namespace {

constexpr int kMaxQuotedLength = 200;

/// One character of the comma-free input and where it stood in the string as given.
struct SourceChar {
  char c;
  int pos;
};

bool is_item(char c) { return c == 'E' || c == 't' || c == 'm' || c == 'L'; }

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] != ',') src_.push_back({text[i], static_cast<int>(i)});
    }
  }

  std::vector<SourcedStage> run() {
    while (i_ < src_.size()) step();
    if (in_group_) {
      fail(group_open_pos_, "'(' has no matching ')'", "");
    }
    return split();
  }

 private:
  // What the last thing consumed was; decides whether a `*` may follow.
  enum class Last { kNothing, kChar, kRepeat };

  [[noreturn]] void fail(int pos, const std::string& rule, const std::string& found) const {
    throw LayoutError(fmt::format("{}: position {}: {}{}", quote_layout(text_), pos, rule,
                                  found.empty() ? "" : ", found " + found));
  }

  // Position and description of src_[k], or of the end of the string.
  int pos_at(size_t k) const {
    return k < src_.size() ? src_[k].pos : static_cast<int>(text_.size());
  }
  std::string found_at(size_t k) const {
    return k < src_.size() ? describe_char(src_[k].c) : "the end of the string";
  }

  void append(char c, int pos) {
    if (out_.size() >= static_cast<size_t>(kMaxExpandedLength)) {
      fail(pos,
           fmt::format("the expanded layout must not exceed {} characters", kMaxExpandedLength),
           "");
    }
    out_.push_back({c, pos});
  }

  void step() {
    const SourceChar sc = src_[i_];
    if (is_item(sc.c) || sc.c == '|') {
      append(sc.c, sc.pos);
      last_ = Last::kChar;
      ++i_;
    } else if (sc.c == '(') {
      if (in_group_) fail(sc.pos, "parentheses must not be nested", "'('");
      in_group_ = true;
      group_open_pos_ = sc.pos;
      group_begin_ = out_.size();
      last_ = Last::kNothing;
      ++i_;
    } else if (sc.c == ')') {
      close_group(sc);
    } else if (sc.c == '*') {
      repeat_char(sc);
    } else if (std::isdigit(static_cast<unsigned char>(sc.c))) {
      fail(sc.pos, "a digit may only appear in a repeat count after '*'", describe_char(sc.c));
    } else {
      fail(sc.pos, "unknown character (allowed: E t m L | * ( ) , and digits)",
           describe_char(sc.c));
    }
  }

  void close_group(const SourceChar& sc) {
    if (!in_group_) fail(sc.pos, "')' has no matching '('", "')'");
    if (out_.size() == group_begin_) {
      fail(sc.pos, "a parenthesised group must not be empty", "')' right after '('");
    }
    ++i_;
    if (i_ >= src_.size() || src_[i_].c != '*') {
      fail(pos_at(i_), "a parenthesised group must be followed by '*' and a repeat count",
           found_at(i_));
    }
    ++i_;
    const long count = read_count();
    const size_t group_len = out_.size() - group_begin_;
    if (static_cast<long>(group_len) * count > kMaxExpandedLength) {
      fail(group_open_pos_,
           fmt::format("the expanded layout must not exceed {} characters", kMaxExpandedLength),
           "");
    }
    for (long r = 1; r < count; ++r) {
      for (size_t k = 0; k < group_len; ++k) {
        const SourceChar copy = out_[group_begin_ + k];
        append(copy.c, copy.pos);
      }
    }
    in_group_ = false;
    last_ = Last::kRepeat;
  }

  void repeat_char(const SourceChar& sc) {
    if (last_ == Last::kNothing) {
      fail(sc.pos, "'*' must follow a layout character (E t m L |) or a parenthesised group",
           "'*' with nothing before it to repeat");
    }
    if (last_ == Last::kRepeat) {
      fail(sc.pos, "'*' must not follow a repeat count (a repeat cannot be repeated)", "'*'");
    }
    ++i_;
    const long count = read_count();
    const SourceChar repeated = out_.back();
    if (count > kMaxExpandedLength) {
      fail(sc.pos,
           fmt::format("the expanded layout must not exceed {} characters", kMaxExpandedLength),
           "");
    }
    for (long r = 1; r < count; ++r) append(repeated.c, repeated.pos);
    last_ = Last::kRepeat;
  }

  // Reads the digits at i_ (the character after `*`); returns a count in [1, kMax + 1].
  long read_count() {
    const size_t first = i_;
    long value = 0;
    while (i_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[i_].c))) {
      value = std::min<long>(value * 10 + (src_[i_].c - '0'), kMaxExpandedLength + 1L);
      ++i_;
    }
    if (i_ == first) {
      fail(pos_at(first), "'*' must be followed by a repeat count (digits)", found_at(first));
    }
    if (value == 0) fail(src_[first].pos, "a repeat count must be at least 1", "0");
    return value;
  }

  std::vector<SourcedStage> split() const {
    std::vector<SourcedStage> stages(1);
    for (const SourceChar& sc : out_) {
      if (sc.c == '|') {
        stages.emplace_back();
      } else {
        stages.back().items.push_back(sc.c);
        stages.back().positions.push_back(sc.pos);
      }
    }
    return stages;
  }

  const std::string& text_;
  std::vector<SourceChar> src_;  // the input without commas
  size_t i_ = 0;                 // next index into src_
  std::vector<SourceChar> out_;  // the expanded layout, `|` included
  Last last_ = Last::kNothing;
  bool in_group_ = false;
  int group_open_pos_ = 0;
  size_t group_begin_ = 0;  // out_ index where the open group starts
};

}  // namespace

std::vector<SourcedStage> parse_sourced(const std::string& text) { return Parser(text).run(); }

std::string describe_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f && c != '\\' && c != '\'') return fmt::format("'{}'", c);
  if (c == '\\' || c == '\'') return fmt::format("'\\{}'", c);
  return fmt::format("'\\x{:02x}'", u);
}

std::string quote_layout(const std::string& text) {
  std::string body;
  const size_t shown = std::min<size_t>(text.size(), kMaxQuotedLength);
  for (size_t i = 0; i < shown; ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u >= 0x20 && u < 0x7f && text[i] != '"' && text[i] != '\\') {
      body.push_back(text[i]);
    } else if (text[i] == '"' || text[i] == '\\') {
      body += fmt::format("\\{}", text[i]);
    } else {
      body += fmt::format("\\x{:02x}", u);
    }
  }
  if (shown == text.size()) return fmt::format("layout \"{}\"", body);
  return fmt::format("layout \"{}...\" ({} characters)", body, text.size());
}

}  // namespace internal

ParsedLayout parse_layout(const std::string& text) {
  ParsedLayout parsed;
  parsed.text = text;
  for (internal::SourcedStage& stage : internal::parse_sourced(text)) {
    parsed.stages.push_back(std::move(stage.items));
  }
  return parsed;
}

}  // namespace mtp::layout
