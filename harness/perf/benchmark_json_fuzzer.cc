// libFuzzer target for the Google Benchmark JSON reader (ci/sanitize.sh runs it from the seed
// corpus in fuzz_corpus/benchmark_json_fuzzer/: Google Benchmark output as 1.7.1 writes it, with
// aggregates, skipped runs and NaN, and broken documents). Input: the file's text. It is parsed
// (parse_benchmark_json: parse_json's size and depth bounds), and when it reads, written to a
// file and merged alone (merge_benchmark_json, whose output is bounded), and the merged document
// must read back with the same benchmarks. Every input must either read so or throw InputError
// naming the file; any other exception (nlohmann's included), a disagreement (abort), a crash or
// a sanitizer report is a finding.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness/common/error.h"
#include "harness/perf/benchmark_json.h"

namespace {

/// The file that holds the current input: one per process, in /dev/shm when there is one.
struct InputFile {
  std::string path;
  InputFile() {
    const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path = std::string(dir) + "/benchmark_json_fuzzer_XXXXXX";
    const int fd = ::mkstemp(path.data());
    if (fd < 0) std::abort();
    ::close(fd);
  }
  ~InputFile() { ::unlink(path.c_str()); }
  void put(const std::string& text) const {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size() ||
        std::fclose(f) != 0) {
      std::abort();
    }
  }
};

bool same(const mtp::perf::BenchmarkFile& a, const mtp::perf::BenchmarkFile& b) {
  if (a.benchmarks.size() != b.benchmarks.size()) return false;
  for (size_t i = 0; i < a.benchmarks.size(); ++i) {
    const auto &x = a.benchmarks[i], &y = b.benchmarks[i];
    if (x.name != y.name || x.real_time_ns != y.real_time_ns || x.error != y.error) return false;
  }
  return a.aggregates_skipped == b.aggregates_skipped;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const InputFile input;
  const std::string text(reinterpret_cast<const char*>(data), size);
  mtp::perf::BenchmarkFile file;
  try {
    file = mtp::perf::parse_benchmark_json(text, "fuzz.json");
  } catch (const mtp::InputError& e) {
    if (std::string(e.what()).compare(0, 9, "fuzz.json") != 0) std::abort();
    return 0;
  }
  input.put(text);
  std::string merged;
  try {
    merged = mtp::perf::merge_benchmark_json({input.path});
  } catch (const mtp::InputError& e) {
    // Only the output bound may refuse what reads: a dense document of deep indentation.
    if (std::string(e.what()).find("the merged JSON would be more than") == std::string::npos) {
      std::abort();
    }
    return 0;
  }
  if (!same(file, mtp::perf::parse_benchmark_json(merged, "merged.json"))) std::abort();
  return 0;
}
