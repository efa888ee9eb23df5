#include "harness/perf/benchmark_json.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness/common/error.h"
#include "harness/common/input_file.h"
#include "harness/common/json_input.h"

namespace mtp::perf {

const char* const kFingerprintKeys[2] = {"gpu", "driver"};

namespace {

using nlohmann::json;

/// The text with every bare NaN, -NaN, Infinity and -Infinity outside strings replaced by null
/// (Google Benchmark's FormatKV writes non-finite doubles that way).
std::string nonfinite_to_null(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[i + 1];
        i += 2;
        continue;
      }
      if (c == '"') in_string = false;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      ++i;
      continue;
    }
    const size_t j = c == '-' ? i + 1 : i;
    if (text.compare(j, 3, "NaN") == 0) {
      out += "null";
      i = j + 3;
    } else if (text.compare(j, 8, "Infinity") == 0) {
      out += "null";
      i = j + 8;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

/// The document of `text` (parse_json: bounded size and depth, errors with the position; lines
/// are the file's, a column on a line after a bare NaN or Infinity counts it as "null").
json parse_document(const std::string& text, const std::string& path) {
  return parse_json(nonfinite_to_null(text), path);
}

/// How much larger than its inputs `perf merge`'s output may be: Google Benchmark writes its JSON
/// indented as merge does (2 spaces, one value a line), so the output is about the inputs' size;
/// deeply nested or tightly packed input could grow by the indentation of every line (up to 2
/// bytes per nesting level), which this bounds.
constexpr uint64_t kMergeGrowth = 4;
constexpr uint64_t kMergeSlackBytes = uint64_t{1} << 20;

/// Appends `j` to `out` as nlohmann's dump(2) writes it (byte for byte), refusing to pass
/// `budget` bytes. Recursion depth is bounded by parse_json's depth limit.
void dump_bounded(const json& j, size_t indent, size_t budget, std::string& out) {
  auto room = [&] {
    if (out.size() > budget) {
      throw InputError(
          fmt::format("perf merge: the merged JSON would be more than {} bytes ({} × "
                      "the inputs' size + 1 MiB): the inputs are not Google "
                      "Benchmark JSON as its programs write it",
                      budget, kMergeGrowth));
    }
  };
  const bool object = j.is_object();
  if (!(object || j.is_array()) || j.empty()) {
    out += j.dump();
    room();
    return;
  }
  out += object ? "{\n" : "[\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ",\n";
    first = false;
    out.append(indent + 2, ' ');
    if (object) out += json(it.key()).dump() + ": ";
    room();
    dump_bounded(*it, indent + 2, budget, out);
  }
  out += "\n";
  out.append(indent, ' ');
  out += object ? "}" : "]";
  room();
}

std::string read_text(const std::string& path) {
  const std::vector<uint8_t> bytes = read_input_file(path, "benchmark JSON", kMaxSmallInputBytes);
  return std::string(bytes.begin(), bytes.end());
}

/// Nanoseconds per `unit` (Google Benchmark's time units), or 0 for an unknown unit.
double ns_per_unit(const std::string& unit) {
  if (unit == "ns") return 1.0;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  return 0.0;
}

const json& benchmarks_array(const json& doc, const std::string& path) {
  if (!doc.is_object()) {
    throw InputError(
        fmt::format("{}: not Google Benchmark JSON (the top level is not an object)", path));
  }
  const auto it = doc.find("benchmarks");
  if (it == doc.end() || !it->is_array()) {
    throw InputError(fmt::format("{}: not Google Benchmark JSON (no \"benchmarks\" array)", path));
  }
  if (doc.contains("context") && !doc.at("context").is_object()) {
    throw InputError(fmt::format("{}: \"context\" is not an object", path));
  }
  return *it;
}

/// Whether a benchmark entry was skipped (error_occurred or skipped is true), and its message.
bool skipped(const json& e, std::string* message) {
  for (const auto& [flag, text] :
       {std::pair<const char*, const char*>{"error_occurred", "error_message"},
        {"skipped", "skip_message"}}) {
    const auto f = e.find(flag);
    if (f != e.end() && f->is_boolean() && f->get<bool>()) {
      const auto m = e.find(text);
      *message = m != e.end() && m->is_string() ? m->get<std::string>() : std::string(flag);
      return true;
    }
  }
  return false;
}

BenchmarkFile from_document(const json& doc, const std::string& path) {
  const json& entries = benchmarks_array(doc, path);
  BenchmarkFile file;
  file.path = path;
  if (doc.contains("context")) {
    for (const auto& [k, v] : doc.at("context").items()) {
      if (v.is_string()) {
        file.context[k] = v.get<std::string>();
      } else if (v.is_primitive() && !v.is_null()) {
        file.context[k] = v.dump();
      }
    }
  }
  std::map<std::string, size_t> index;
  size_t repetitions = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const json& e = entries[i];
    if (!e.is_object() || !e.contains("name") || !e.at("name").is_string()) {
      throw InputError(fmt::format("{}: benchmarks[{}] has no string \"name\"", path, i));
    }
    const std::string name = e.at("name").get<std::string>();
    const auto rt = e.find("run_type");
    if (rt != e.end() && rt->is_string() && rt->get<std::string>() == "aggregate") {
      ++file.aggregates_skipped;
      continue;
    }
    auto [it, inserted] = index.emplace(name, file.benchmarks.size());
    if (inserted) file.benchmarks.push_back(BenchmarkSeries{name, {}, {}});
    BenchmarkSeries& series = file.benchmarks[it->second];
    std::string message;
    if (skipped(e, &message)) {
      series.error = message;
      continue;
    }
    const auto t = e.find("real_time");
    if (t == e.end() || !t->is_number() || !std::isfinite(t->get<double>()) ||
        t->get<double>() < 0.0) {
      throw InputError(
          fmt::format("{}: benchmarks[{}] (\"{}\") has no finite, non-negative "
                      "\"real_time\"",
                      path, i, name));
    }
    const auto u = e.find("time_unit");
    const double scale = u != e.end() && u->is_string() ? ns_per_unit(u->get<std::string>()) : 0.0;
    if (scale == 0.0) {
      throw InputError(
          fmt::format("{}: benchmarks[{}] (\"{}\") has no \"time_unit\" of ns, us, "
                      "ms or s",
                      path, i, name));
    }
    series.real_time_ns.push_back(t->get<double>() * scale);
    ++repetitions;
  }
  if (repetitions == 0) {
    throw InputError(fmt::format(
        "{}: no per-repetition results (entries with run_type \"iteration\" that ran): {} "
        "benchmark entries, {} aggregates. Run the benchmarks with --benchmark_repetitions=N and "
        "without --benchmark_report_aggregates_only",
        path, entries.size(), file.aggregates_skipped));
  }
  return file;
}

std::string context_value(const BenchmarkFile& f, const std::string& key) {
  const auto it = f.context.find(key);
  return it == f.context.end() ? std::string("(none)") : it->second;
}

}  // namespace

BenchmarkFile parse_benchmark_json(const std::string& text, const std::string& path) {
  return from_document(parse_document(text, path), path);
}

BenchmarkFile read_benchmark_json(const std::string& path) {
  return parse_benchmark_json(read_text(path), path);
}

std::vector<std::string> fingerprint_mismatches(const BenchmarkFile& a, const BenchmarkFile& b) {
  std::vector<std::string> out;
  for (const char* key : kFingerprintKeys) {
    const std::string va = context_value(a, key), vb = context_value(b, key);
    if (va != vb) out.push_back(fmt::format("{}: {} vs {}", key, va, vb));
  }
  return out;
}

std::string merge_benchmark_json(const std::vector<std::string>& paths) {
  if (paths.empty()) throw InputError("perf merge: no input files");
  json merged;
  BenchmarkFile first;
  std::map<std::string, std::string> seen;  // benchmark name → the file that holds it
  uint64_t input_bytes = 0;
  for (const std::string& path : paths) {
    const std::string text = read_text(path);
    input_bytes += text.size();
    const json doc = parse_document(text, path);
    const BenchmarkFile file = from_document(doc, path);  // validates the file
    if (merged.is_null()) {
      merged = json::object();
      merged["context"] = doc.value("context", json::object());
      merged["context"]["merged_from"] = json::array();
      merged["benchmarks"] = json::array();
      first = file;
    } else if (const auto diff = fingerprint_mismatches(first, file); !diff.empty()) {
      throw InputError(
          fmt::format("perf merge: {} and {} were measured on different machines "
                      "({})",
                      first.path, path, fmt::join(diff, "; ")));
    }
    std::set<std::string> names;
    for (const json& e : doc.at("benchmarks")) names.insert(e.at("name").get<std::string>());
    for (const std::string& name : names) {
      const auto [it, inserted] = seen.emplace(name, path);
      if (!inserted) {
        throw InputError(fmt::format("perf merge: benchmark \"{}\" is in both {} and {}", name,
                                     it->second, path));
      }
    }
    for (const json& e : doc.at("benchmarks")) merged["benchmarks"].push_back(e);
    merged["context"]["merged_from"].push_back(path);
  }
  std::string out;
  dump_bounded(merged, 0, kMergeGrowth * input_bytes + kMergeSlackBytes, out);
  return out + "\n";
}

}  // namespace mtp::perf
