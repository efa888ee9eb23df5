// find_nonfinite, nonfinite_text and NonFiniteValue (finite.h).

#include "harness/record/finite.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "harness/common/error.h"
#include "harness/common/json_input.h"
#include "harness/common/utf8.h"
#include "harness/record/record.h"

namespace mtp::record {
namespace {

/// Exponent and mantissa masks of a float dtype stored in U.
template <typename U>
NonFinite scan(const uint8_t* p, size_t n, U exp_mask) {
  NonFinite out;
  for (size_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, p + i * sizeof(U), sizeof(U));
    if ((u & exp_mask) != exp_mask) continue;
    if (out.count++ == 0) {
      out.first_index = static_cast<int64_t>(i);
      out.first_bits = u;
    }
  }
  return out;
}

struct Masks {
  uint64_t exp, man, sign;
};

std::optional<Masks> masks(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return Masks{0x7f800000u, 0x007fffffu, 0x80000000u};
    case DType::kF64:
      return Masks{0x7ff0000000000000ull, 0x000fffffffffffffull, 0x8000000000000000ull};
    case DType::kBF16:
      return Masks{0x7f80u, 0x007fu, 0x8000u};
    case DType::kF16:
      return Masks{0x7c00u, 0x03ffu, 0x8000u};
    default:
      return std::nullopt;
  }
}

}  // namespace

NonFinite find_nonfinite(const void* data, size_t nbytes, DType dtype) {
  const auto m = masks(dtype);
  if (!m || nbytes == 0) return {};
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t n = nbytes / static_cast<size_t>(dtype_size(dtype));
  switch (dtype_size(dtype)) {
    case 2:
      return scan<uint16_t>(p, n, static_cast<uint16_t>(m->exp));
    case 4:
      return scan<uint32_t>(p, n, static_cast<uint32_t>(m->exp));
    default:
      return scan<uint64_t>(p, n, m->exp);
  }
}

std::string nonfinite_text(uint64_t bits, DType dtype) {
  const auto m = masks(dtype);
  if (!m || (bits & m->exp) != m->exp) return "finite";
  if ((bits & m->man) != 0) return "nan";
  return (bits & m->sign) != 0 ? "-inf" : "inf";
}

std::string NonFiniteValue::describe() const {
  std::vector<int64_t> coord(shape.size(), 0);
  int64_t flat = first.first_index;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] > 0) {
      coord[k] = flat % shape[k];
      flat /= shape[k];
    }
  }
  return fmt::format(
      "step {} {}/{}[{}] = {} (0x{:0{}x}): {} of its {} elements and {} tensor(s) "
      "of the record are not finite",
      step, group, name, fmt::join(coord, ", "), nonfinite_text(first.first_bits, dtype),
      first.first_bits, 2 * dtype_size(dtype), first.count,
      [&] {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
      }(),
      tensors);
}

std::string NonFiniteValue::to_json() const {
  nlohmann::json j = {{"step", step},
                      {"group", group},
                      {"name", name},
                      {"dtype", dtype_name(dtype)},
                      {"shape", shape},
                      {"count", first.count},
                      {"index", first.first_index},
                      {"bits", first.first_bits},
                      {"tensors", tensors}};
  return j.dump();
}

NonFiniteValue NonFiniteValue::from_json(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = parse_json(text, source);
  } catch (const InputError& e) {
    throw RecordError(e.what());
  }
  auto bad = [&](const std::string& why) {
    throw RecordError(
        fmt::format("{}: {} (the writer makes {{\"step\", \"group\", \"name\", "
                    "\"dtype\", \"shape\", \"count\", \"index\", \"bits\", "
                    "\"tensors\"}})",
                    source, why));
  };
  if (!j.is_object()) bad(fmt::format("a JSON {}, not an object", j.type_name()));
  // The value of `key`, which must be of the type `is` tests.
  auto field = [&](const char* key, bool (nlohmann::json::*is)() const,
                   const char* type) -> const nlohmann::json& {
    const auto it = j.find(key);
    if (it == j.end()) bad(fmt::format("no \"{}\"", key));
    if (!((*it).*is)()) {
      bad(fmt::format("\"{}\" is a JSON {}, not {}", key, it->type_name(), type));
    }
    return *it;
  };
  // A signed integer in [lo, hi].
  auto integer = [&](const char* key, int64_t lo, int64_t hi) {
    const nlohmann::json& v = field(key, &nlohmann::json::is_number_integer, "an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
      bad(fmt::format("\"{}\" is {}, outside [{}, {}]", key, v.get<uint64_t>(), lo, hi));
    }
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) bad(fmt::format("\"{}\" is {}, outside [{}, {}]", key, x, lo, hi));
    return x;
  };
  constexpr int64_t kMaxElements = int64_t{1} << 62;
  NonFiniteValue v;
  v.step = static_cast<int>(integer("step", 0, 999999));
  v.group = field("group", &nlohmann::json::is_string, "a string").get<std::string>();
  const auto& groups = record_groups();
  if (std::find(groups.begin(), groups.end(), v.group) == groups.end()) {
    bad(fmt::format("\"group\" is \"{}\", not a record group ({})", printable(v.group),
                    fmt::join(groups, ", ")));
  }
  v.name = field("name", &nlohmann::json::is_string, "a string").get<std::string>();
  const std::string dtype =
      field("dtype", &nlohmann::json::is_string, "a string").get<std::string>();
  try {
    v.dtype = parse_dtype(dtype);
  } catch (const InputError&) {
    bad(fmt::format("\"dtype\" is \"{}\", not a record dtype", printable(dtype)));
  }
  if (!masks(v.dtype)) {
    bad(fmt::format("\"dtype\" is {}, which holds no non-finite values", dtype));
  }
  int64_t elements = 1;
  for (const nlohmann::json& d : field("shape", &nlohmann::json::is_array, "an array")) {
    if (!d.is_number_unsigned()) {
      bad(fmt::format("\"shape\" holds {}, not a dimension (an integer >= 0)", d.dump()));
    }
    const uint64_t n = d.get<uint64_t>();
    if (n > static_cast<uint64_t>(kMaxElements) ||
        (n != 0 && elements > kMaxElements / static_cast<int64_t>(n))) {
      bad(fmt::format("\"shape\" {} has more than 2^62 elements", j.at("shape").dump()));
    }
    elements *= static_cast<int64_t>(n);
    v.shape.push_back(static_cast<int64_t>(n));
  }
  if (elements < 1) bad(fmt::format("\"shape\" [{}] holds no element", fmt::join(v.shape, ", ")));
  v.first.count = integer("count", 1, elements);
  v.first.first_index = integer("index", 0, elements - 1);
  const nlohmann::json& bits =
      field("bits", &nlohmann::json::is_number_unsigned, "an integer >= 0");
  v.first.first_bits = bits.get<uint64_t>();
  const int width = 8 * dtype_size(v.dtype);
  if ((width < 64 && (v.first.first_bits >> width) != 0) ||
      nonfinite_text(v.first.first_bits, v.dtype) == "finite") {
    bad(fmt::format("\"bits\" 0x{:x} is not a non-finite {} value", v.first.first_bits, dtype));
  }
  v.tensors = integer("tensors", 1, std::numeric_limits<int64_t>::max());
  return v;
}

}  // namespace mtp::record
