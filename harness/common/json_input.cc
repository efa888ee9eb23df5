// parse_json (json_input.h): a depth pre-scan, then nlohmann's SAX parser feeding its own DOM
// builder, with the errors turned into InputError that names the source and the position.
#include "harness/common/json_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "harness/common/error.h"
#include "harness/common/utf8.h"

namespace mtp {
namespace {

using nlohmann::json;

/// "line L, column C (byte B)" of byte offset `at` of `text` (B as given, L and C from 1).
std::string position(std::string_view text, size_t at) {
  at = std::min(at, text.size());
  const std::string_view before = text.substr(0, at);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t nl = before.rfind('\n');
  const size_t column = 1 + (nl == std::string_view::npos ? at : at - nl - 1);
  return fmt::format("line {}, column {} (byte {})", line, column, at);
}

/// The byte offset of the first bracket that opens a level deeper than `max_depth`, outside
/// strings; nullopt when there is none. Exact for valid JSON; for invalid text the parser that
/// runs next may find an earlier syntax error, but nothing deeper than max_depth reaches it.
std::optional<size_t> too_deep(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

/// nlohmann's DOM builder with the position of a parse error kept, and duplicate keys refused.
class Builder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit Builder(json& root) : dom_(root, /*allow_exceptions=*/false) {}

  bool null() {
    value();
    return dom_.null();
  }
  bool boolean(bool v) {
    value();
    return dom_.boolean(v);
  }
  bool number_integer(number_integer_t v) {
    value();
    return dom_.number_integer(v);
  }
  bool number_unsigned(number_unsigned_t v) {
    value();
    return dom_.number_unsigned(v);
  }
  bool number_float(number_float_t v, const string_t& s) {
    value();
    return dom_.number_float(v, s);
  }
  bool string(string_t& v) {
    value();
    return dom_.string(v);
  }
  bool binary(binary_t& v) {
    value();
    return dom_.binary(v);
  }
  bool start_object(std::size_t n) {
    value();
    path_.push_back({true, 0, {}, {}});
    return dom_.start_object(n);
  }
  bool key(string_t& k) {
    Level& level = path_.back();
    if (!level.keys.insert(k).second) {
      duplicate_ = fmt::format("at {}: duplicate key \"{}\" (each key of an object must be unique)",
                               where(), printable(k));
      return false;
    }
    level.key = k;
    return dom_.key(k);
  }
  bool end_object() {
    path_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    value();
    path_.push_back({false, 0, {}, {}});
    return dom_.start_array(n);
  }
  bool end_array() {
    path_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& last_token,
                   const nlohmann::detail::exception& ex) {
    // nlohmann's position counts the characters read, the offending one included; a number out
    // of range is named by its first character.
    const size_t back = ex.id == 406 ? std::max<size_t>(last_token.size(), 1) : 1;
    error_at_ = pos >= back ? pos - back : 0;
    error_ = ex.what();
    return false;
  }

  std::optional<size_t> error_at_;
  std::string error_, duplicate_;

 private:
  struct Level {
    bool object = false;
    size_t next = 0;  ///< arrays: the index of the next element
    std::string key;  ///< objects: the current key
    std::set<std::string> keys;
  };
  /// Called before each value: advances the enclosing array's index.
  void value() {
    if (!path_.empty() && !path_.back().object) ++path_.back().next;
  }
  /// "benchmarks[3].context" for the value being read ("the top level" outside any container).
  std::string where() const {
    std::string out;
    for (const Level& l : path_) {
      if (l.object) {
        if (&l != &path_.back()) out += (out.empty() ? "" : ".") + printable(l.key);
      } else {
        out += fmt::format("[{}]", l.next - 1);
      }
    }
    return out.empty() ? "the top level" : out;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<Level> path_;
};

/// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1,
/// column 2: " prefix (parse_json gives the position itself).
std::string message_of(std::string what) {
  if (what.compare(0, 16, "[json.exception.") == 0) {
    const size_t end = what.find("] ");
    if (end != std::string::npos) what.erase(0, end + 2);
  }
  if (what.compare(0, 11, "parse error") == 0) {
    const size_t colon = what.find(": ");
    if (colon != std::string::npos) what.replace(0, colon + 2, "not valid JSON: ");
  }
  if (what.compare(0, 15, "number overflow") == 0) {
    what += " (a JSON number must be a finite double)";
  }
  return printable(what);
}

}  // namespace

json parse_json(std::string_view text, const std::string& source, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw InputError(fmt::format("{}: {} bytes of JSON, more than the {} bytes it may have here",
                                 source, text.size(), limits.max_bytes));
  }
  if (const auto at = too_deep(text, limits.max_depth)) {
    throw InputError(fmt::format("{}: {}: nesting deeper than {} levels of arrays and objects",
                                 source, position(text, *at), limits.max_depth));
  }
  json root;
  Builder builder(root);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const json::exception& e) {  // not expected: the builder does not throw
    throw InputError(fmt::format("{}: {}", source, message_of(e.what())));
  }
  if (!builder.duplicate_.empty()) {
    throw InputError(fmt::format("{}: {}", source, builder.duplicate_));
  }
  if (builder.error_at_) {
    throw InputError(fmt::format("{}: {}: {}", source, position(text, *builder.error_at_),
                                 message_of(builder.error_)));
  }
  if (!ok || root.is_discarded()) {
    throw InputError(fmt::format("{}: not valid JSON", source));
  }
  return root;
}

}  // namespace mtp
