// File: harness/perf/benchmark_json.h
//
// Reads the JSON that Google Benchmark programs write (--benchmark_out=F
// --benchmark_out_format=json, 1.7 and later): the run "context" (machine, library, and the
// key/value pairs of --benchmark_context or AddCustomContext) and, per benchmark name, the
// real time of each repetition (entries with run_type "iteration"; aggregates such as _mean or
// _median are skipped, as google/benchmark's tools/compare.py does for its U test). Also merges
// several such files into one (one baseline file for several programs). Torch-free.
//
// Example:
//   const BenchmarkFile f = read_benchmark_json("golden/perf/h200.json");
//   for (const BenchmarkSeries& s : f.benchmarks) use(s.name, s.real_time_ns);
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace mtp::perf {

/// BenchmarkSeries: every repetition of one benchmark name in one file.
struct BenchmarkSeries {
  std::string name;                  ///< the entries' "name", e.g. "BM_RmsNorm/.../manual_time"
  std::vector<double> real_time_ns;  ///< "real_time" of each repetition, in ns, in file order
  /// The "error_message" (or "skip_message") of a repetition that was skipped
  /// (error_occurred / skipped); such repetitions add no time. Empty when every one ran.
  std::string error;
};

/// BenchmarkFile: one Google Benchmark JSON file.
struct BenchmarkFile {
  std::string path;
  /// "context" entries with a scalar value (strings as they are, numbers and booleans as JSON
  /// text); arrays and objects (caches, load_avg) are left out.
  std::map<std::string, std::string> context;
  std::vector<BenchmarkSeries> benchmarks;  ///< in order of first appearance
  size_t aggregates_skipped = 0;            ///< entries with run_type "aggregate"
};

/// kFingerprintKeys: the context keys that name the machine a result is valid for: the GPU's
/// name and the driver version, as ci/gpu.sh passes them (--benchmark_context=gpu=…,driver=…).
extern const char* const kFingerprintKeys[2];

/// read_benchmark_json: reads and parses `path` (through parse_json, common/json_input.h).
/// Non-finite numbers, which Google Benchmark writes as bare NaN / Infinity (not JSON), are read
/// as null. Throws InputError whose message starts with the path and says what is wrong: the
/// file cannot be read; is not JSON, nests arrays and objects deeper than 64 levels, holds a
/// number out of double range (1e400) or a key twice in one object (each with its line, column
/// and byte); has no "benchmarks" array; an entry lacks a string "name"; a repetition lacks a
/// finite, non-negative "real_time" or a known "time_unit" (ns, us, ms, s); or the file holds
/// no repetition at all (only aggregates: rerun without --benchmark_report_aggregates_only).
BenchmarkFile read_benchmark_json(const std::string& path);

/// parse_benchmark_json: read_benchmark_json on `text`; `path` names it in errors.
BenchmarkFile parse_benchmark_json(const std::string& text, const std::string& path);

/// fingerprint_mismatches: for each key of kFingerprintKeys whose value differs between the
/// two contexts (a missing key counts as the value "(none)"), "key: A vs B". Empty when the
/// machines match.
std::vector<std::string> fingerprint_mismatches(const BenchmarkFile& a, const BenchmarkFile& b);

/// merge_benchmark_json: one Google Benchmark JSON document (indented text, as nlohmann's
/// dump(2) writes it) holding the "benchmarks" of every file of `paths` in order, under the
/// first file's "context" plus "merged_from" (the paths). Throws InputError when `paths` is
/// empty, a file is unreadable or not Google Benchmark JSON (as read_benchmark_json), the files'
/// fingerprints differ, two files hold a benchmark of the same name, or the output would be more
/// than 4 times the inputs' bytes + 1 MiB (values packed tightly at a deep level, each then on a
/// line of its own indentation: never Google Benchmark's own output).
std::string merge_benchmark_json(const std::vector<std::string>& paths);

}  // namespace mtp::perf
