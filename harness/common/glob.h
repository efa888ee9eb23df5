// File: harness/common/glob.h
//
// Shell-style name patterns used by expectations and `compare --include/--exclude`:
// `*` matches any run of characters (dots included), `?` one character, everything else itself.
// Example: glob_match("decoder.layers.*.mlp.*", "decoder.layers.3.mlp.linear_fc1.weight") == true.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mtp {

/// True iff `text` matches the whole `pattern` (`*` any run, `?` any one character).
bool glob_match(std::string_view pattern, std::string_view text);

/// True iff `text` matches at least one pattern of `patterns`.
bool glob_match_any(const std::vector<std::string>& patterns, std::string_view text);

}  // namespace mtp
