// CompareClass::parse / to_string (compare.h).

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "harness/compare/compare.h"

namespace mtp::compare {
namespace {

constexpr const char* kAcceptedForms =
    "bitwise, ulp:N (N a non-negative integer), tol:RTOL,ATOL (both non-negative and finite), "
    "rel_l2:B (B non-negative and finite), differ";

[[noreturn]] void reject(const std::string& text, const std::string& why) {
  throw InputError(fmt::format("invalid comparison class '{}': {}; accepted forms: {}", text, why,
                               kAcceptedForms));
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

/// Parses all of `s` as a non-negative finite double (no sign, no spaces).
bool parse_tolerance(const std::string& s, double& out) {
  if (s.empty() || s[0] == '-' || s[0] == '+') {
    return false;
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(out) && out >= 0.0;
}

}  // namespace

CompareClass CompareClass::parse(const std::string& text) {
  CompareClass c;
  if (text == "bitwise") {
    c.kind = Kind::kBitwise;
    return c;
  }
  if (text == "differ") {
    c.kind = Kind::kDiffer;
    return c;
  }
  if (starts_with(text, "ulp:")) {
    std::string n = text.substr(4);
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) {
      reject(text, "N must be a non-negative integer");
    }
    auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), c.max_ulp);
    if (ec != std::errc() || end != n.data() + n.size()) {
      reject(text, "N is too large");
    }
    c.kind = Kind::kUlp;
    return c;
  }
  if (starts_with(text, "tol:")) {
    std::string args = text.substr(4);
    size_t comma = args.find(',');
    if (comma == std::string::npos) {
      reject(text, "tol needs two values, RTOL and ATOL");
    }
    if (!parse_tolerance(args.substr(0, comma), c.rtol) ||
        !parse_tolerance(args.substr(comma + 1), c.atol)) {
      reject(text, "RTOL and ATOL must be non-negative finite numbers");
    }
    c.kind = Kind::kTol;
    return c;
  }
  if (starts_with(text, "rel_l2:")) {
    if (!parse_tolerance(text.substr(7), c.max_rel_l2)) {
      reject(text, "B must be a non-negative finite number");
    }
    c.kind = Kind::kRelL2;
    return c;
  }
  reject(text, "unknown class");
}

std::string CompareClass::to_string() const {
  switch (kind) {
    case Kind::kBitwise:
      return "bitwise";
    case Kind::kUlp:
      return fmt::format("ulp:{}", max_ulp);
    case Kind::kTol:
      return fmt::format("tol:{},{}", rtol, atol);
    case Kind::kRelL2:
      return fmt::format("rel_l2:{}", max_rel_l2);
    case Kind::kDiffer:
      return "differ";
  }
  return "unknown";
}

}  // namespace mtp::compare
