// File: harness/common/json_input.h
//
// The one way the tool parses JSON it did not make in this process: files the user names
// (Google Benchmark JSON for `perf`) and JSON kept in record attributes (first_nonfinite,
// tensor_index, param_stages, stage_coords). nlohmann::json::parse alone accepts any nesting
// depth (its serializer and copies recurse: a document nested 100,000 deep crashes the process,
// one nested 30,000 deep dumps as gigabytes of indentation) and throws its own exception types
// (parse_error, out_of_range for a number such as 1e400) that carry no file name. parse_json
// bounds the text's size and nesting depth, refuses duplicate object keys (nlohmann keeps the
// last silently) and turns every failure into an InputError that names the source, the position
// and the rule broken.
//
// Example:
//   const nlohmann::json doc = parse_json(text, "golden/perf/h200.json");
//   // InputError "golden/perf/h200.json: line 3, column 17 (byte 41): number overflow parsing
//   // '1e400' (a JSON number must be a finite double)"
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace mtp {

/// Bounds on a JSON text parse_json accepts.
struct JsonLimits {
  /// Largest text in bytes (256 MiB, as kMaxSmallInputBytes of input_file.h).
  uint64_t max_bytes = uint64_t{1} << 28;
  /// Deepest nesting of arrays and objects: the top-level value's brackets are depth 1. Google
  /// Benchmark JSON needs 4, the record attributes 3.
  int max_depth = 64;
};

/// parse_json: the JSON value of `text` (RFC 8259, one value, whitespace around it allowed; no
/// comments), read from `source` (a path, or "<record>: root attribute 'x'") which every error
/// names. Throws InputError "<source>: <what>" for a text over limits.max_bytes, and
/// "<source>: line L, column C (byte B): <what>" (B 0-based, L and C 1-based) for: nesting deeper
/// than limits.max_depth (at the bracket that opens the level too many), a syntax error, invalid
/// UTF-8 or an unescaped control character in a string, a number out of double range (1e400);
/// "<source>: at <path>: duplicate key \"k\"" (path as `benchmarks[3]`) for an object that
/// names a key twice. Never throws nlohmann's exceptions, never recurses deeper than
/// limits.max_depth.
nlohmann::json parse_json(std::string_view text, const std::string& source,
                          const JsonLimits& limits = JsonLimits{});

}  // namespace mtp
