#include "harness/record/h5_attr.h"

#include <fmt/format.h>

#include <cstdlib>
#include <type_traits>

namespace mtp::record {
namespace {

[[noreturn]] void attr_fail(const h5::Attribute& a, const std::string& what) {
  throw RecordError(fmt::format("{}: {}: {}", a.where().file, a.where().path, what));
}

void require_scalar(const h5::Attribute& a) {
  h5::DataSpace space = a.space();
  if (space.kind() == H5S_NULL || space.num_points() != 1) {
    attr_fail(a, fmt::format("attribute has {} elements; only single values are supported",
                             space.kind() == H5S_NULL ? 0 : space.num_points()));
  }
}

std::string read_string(const h5::Attribute& a, const h5::Type& type) {
  if (type.is_variable_string()) {
    h5::Type mem = h5::Type::copy_of(type.id());  // same character set, char* in memory
    char* text = nullptr;
    a.read(mem.id(), &text);
    std::string s = text == nullptr ? "" : text;
    H5free_memory(text);
    return s;
  }
  std::string s(type.size(), '\0');
  h5::Type mem = h5::Type::copy_of(type.id());
  a.read(mem.id(), s.data());
  // Null-terminated or null/space padded: drop the padding.
  size_t end = s.find('\0');
  if (end != std::string::npos) {
    s.resize(end);
  }
  if (H5Tget_strpad(type.id()) == H5T_STR_SPACEPAD) {
    s.erase(s.find_last_not_of(' ') + 1);
  }
  return s;
}

}  // namespace

void write_attr(const h5::Object& obj, const std::string& key, const AttrValue& value) {
  h5::DataSpace scalar = h5::DataSpace::scalar();
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          h5::Type t = h5::Type::copy_of(H5T_STD_I64LE);
          obj.create_attribute(key, t, scalar).write(H5T_NATIVE_INT64, &v);
        } else if constexpr (std::is_same_v<T, double>) {
          h5::Type t = h5::Type::copy_of(H5T_IEEE_F64LE);
          obj.create_attribute(key, t, scalar).write(H5T_NATIVE_DOUBLE, &v);
        } else {
          // An empty string is stored as one NUL byte (HDF5 string types have size >= 1).
          std::string padded = v.empty() ? std::string(1, '\0') : v;
          h5::Type t = h5::Type::fixed_string(padded.size());
          obj.create_attribute(key, t, scalar).write(t.id(), padded.data());
        }
      },
      value);
}

AttrValue read_attr(const h5::Object& obj, const std::string& key) {
  h5::Attribute a = obj.open_attribute(key);
  require_scalar(a);
  h5::Type type = a.type();
  switch (type.type_class()) {
    case H5T_INTEGER: {
      if (H5Tget_sign(type.id()) == H5T_SGN_NONE && type.size() >= 8) {
        uint64_t u = 0;
        a.read(H5T_NATIVE_UINT64, &u);
        if (u > static_cast<uint64_t>(INT64_MAX)) {
          attr_fail(a, fmt::format("unsigned value {} does not fit in int64", u));
        }
        return static_cast<int64_t>(u);
      }
      int64_t v = 0;
      a.read(H5T_NATIVE_INT64, &v);
      return v;
    }
    case H5T_FLOAT: {
      double v = 0;
      a.read(H5T_NATIVE_DOUBLE, &v);
      return v;
    }
    case H5T_STRING:
      return read_string(a, type);
    default:
      attr_fail(a, fmt::format("unsupported attribute type {} (expected integer, float or string)",
                               type.describe()));
  }
}

AttrMap read_attrs(const h5::Object& obj) {
  AttrMap out;
  for (const std::string& key : obj.attribute_names()) {
    out.emplace(key, read_attr(obj, key));
  }
  return out;
}

void write_u64_matrix_attr(const h5::Object& obj, const std::string& key,
                           const std::vector<uint64_t>& values, size_t cols) {
  h5::DataSpace space = h5::DataSpace::simple({values.size() / cols, cols});
  h5::Type t = h5::Type::copy_of(H5T_STD_U64LE);
  obj.create_attribute(key, t, space).write(H5T_NATIVE_UINT64, values.data());
}

std::vector<uint64_t> read_u64_matrix_attr(const h5::Object& obj, const std::string& key,
                                           size_t cols) {
  h5::Attribute a = obj.open_attribute(key);
  h5::DataSpace space = a.space();
  const std::vector<hsize_t> dims =
      space.kind() == H5S_SIMPLE ? space.dims() : std::vector<hsize_t>{};
  if (dims.size() != 2 || dims[1] != cols) {
    attr_fail(a, fmt::format("attribute must be a 2-D array of {} columns", cols));
  }
  h5::Type type = a.type();
  if (type.type_class() != H5T_INTEGER || type.size() != 8) {
    attr_fail(a, fmt::format("attribute is {}, expected 64-bit integers", type.describe()));
  }
  if (dims[0] > (uint64_t{1} << 32)) attr_fail(a, "attribute is too large");
  std::vector<uint64_t> out(static_cast<size_t>(dims[0] * dims[1]));
  a.read(H5T_NATIVE_UINT64, out.data());
  return out;
}

std::string read_string_attr(const h5::Object& obj, const std::string& key) {
  h5::Attribute a = obj.open_attribute(key);
  require_scalar(a);
  h5::Type type = a.type();
  if (type.type_class() != H5T_STRING) {
    attr_fail(a, fmt::format("attribute is {}, expected a string", type.describe()));
  }
  return read_string(a, type);
}

}  // namespace mtp::record
