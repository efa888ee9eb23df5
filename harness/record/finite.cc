// find_nonfinite, nonfinite_text and NonFiniteValue (finite.h).

#include "harness/record/finite.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <nlohmann/json.hpp>

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
    case DType::kF32: return Masks{0x7f800000u, 0x007fffffu, 0x80000000u};
    case DType::kF64:
      return Masks{0x7ff0000000000000ull, 0x000fffffffffffffull, 0x8000000000000000ull};
    case DType::kBF16: return Masks{0x7f80u, 0x007fu, 0x8000u};
    case DType::kF16: return Masks{0x7c00u, 0x03ffu, 0x8000u};
    default: return std::nullopt;
  }
}

}  // namespace

NonFinite find_nonfinite(const void* data, size_t nbytes, DType dtype) {
  const auto m = masks(dtype);
  if (!m || nbytes == 0) return {};
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t n = nbytes / static_cast<size_t>(dtype_size(dtype));
  switch (dtype_size(dtype)) {
    case 2: return scan<uint16_t>(p, n, static_cast<uint16_t>(m->exp));
    case 4: return scan<uint32_t>(p, n, static_cast<uint32_t>(m->exp));
    default: return scan<uint64_t>(p, n, m->exp);
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
  return fmt::format("step {} {}/{}[{}] = {} (0x{:0{}x}): {} of its {} elements and {} tensor(s) "
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

std::optional<NonFiniteValue> NonFiniteValue::from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  try {
    NonFiniteValue v;
    v.step = j.at("step").get<int>();
    v.group = j.at("group").get<std::string>();
    v.name = j.at("name").get<std::string>();
    v.dtype = parse_dtype(j.at("dtype").get<std::string>());
    v.shape = j.at("shape").get<std::vector<int64_t>>();
    v.first.count = j.at("count").get<int64_t>();
    v.first.first_index = j.at("index").get<int64_t>();
    v.first.first_bits = j.at("bits").get<uint64_t>();
    v.tensors = j.at("tensors").get<int64_t>();
    for (int64_t d : v.shape) {
      if (d < 0) return std::nullopt;
    }
    if (v.first.count < 1 || v.first.first_index < 0 || v.tensors < 1) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;  // a missing key, a wrong type, an unknown dtype
  }
}

}  // namespace mtp::record
