// File: harness/replay/record_run_fuzz_recipe.h
//
// The "recipe" inputs of record_run_fuzzer and of its seed writer record_run_fuzz_seeds: a step
// record described as text, one fact a line, written with RecordWriter. A mutated HDF5 file
// rarely gets past HDF5's metadata checksums; a mutated recipe changes an attribute's value or
// a tensor's shape and reaches read_record_run's own rules. Lines ('#' lines are comments; a
// line that does not parse is skipped):
//   a <key> i <int64>                 root attribute, an integer
//   a <key> d <double>                root attribute, a number
//   a <key> s <text>                  root attribute, a string (the rest of the line)
//   w <step> <group> <name> <dtype> <dim>...
//                                     a tensor of zeros: step 0–9, a record group, a dtype
//                                     (float32, float64, bfloat16, int32, uint8), at most 8
//                                     dimensions and 65,536 elements
// Test code (fuzzing only): not part of the tool.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "harness/record/record.h"

namespace mtp::replay::fuzz {

/// True when `s` is a name the recipe may use for an attribute or a tensor: 1–200 characters,
/// no '/', no space, no control character (the writer's own rules are not what is fuzzed).
inline bool recipe_name(const std::string& s) {
  if (s.empty() || s.size() > 200) return false;
  for (unsigned char c : s) {
    if (c <= ' ' || c == '/' || c == 0x7f) return false;
  }
  return true;
}

/// Writes the record `recipe` describes to `path` (replacing it). Returns false when the
/// writer refuses it (RecordError: a tensor given twice); other errors propagate.
inline bool write_recipe_record(const std::string& recipe, const std::string& path) {
  record::RecordWriter w(path);
  std::istringstream lines(recipe);
  try {
    for (std::string line; std::getline(lines, line);) {
      std::istringstream in(line);
      std::string kind;
      in >> kind;
      if (kind == "a") {
        std::string key, type;
        in >> key >> type;
        if (!recipe_name(key)) continue;
        std::string rest;
        std::getline(in, rest);
        if (!rest.empty()) rest.erase(0, 1);
        errno = 0;
        char* end = nullptr;
        if (type == "i") {
          const long long v = std::strtoll(rest.c_str(), &end, 10);
          if (errno == 0 && end != rest.c_str() && *end == '\0') w.set_attr(key, int64_t{v});
        } else if (type == "d") {
          const double v = std::strtod(rest.c_str(), &end);
          if (end != rest.c_str() && *end == '\0') w.set_attr(key, v);
        } else if (type == "s") {
          w.set_attr(key, rest);
        }
      } else if (kind == "w") {
        int step = -1;
        std::string group, name, dtype;
        in >> step >> group >> name >> dtype;
        if (step < 0 || step > 9 || !recipe_name(name)) continue;
        bool known = false;
        for (const auto& g : record::record_groups()) known = known || g == group;
        if (!known) continue;
        record::TensorData t;
        t.name = name;
        try {
          t.dtype = record::parse_dtype(dtype);
        } catch (const InputError&) {
          continue;
        }
        int64_t numel = 1;
        bool ok = true;
        for (long long d; in >> d;) {
          ok = ok && d >= 0 && d <= 65536 && t.shape.size() < 8 && numel * d <= 65536;
          if (!ok) break;
          numel *= d;
          t.shape.push_back(d);
        }
        if (!ok) continue;
        t.bytes.assign(static_cast<size_t>(numel * record::dtype_size(t.dtype)), 0);
        w.write(step, group, t);
      }
    }
    w.commit();
  } catch (const record::RecordError&) {
    return false;
  }
  return true;
}

}  // namespace mtp::replay::fuzz
