// File: harness/compare/compare_benchmark.cc
//
// `compare` of two identical full records of one step of issue 8's "small" model (185M fp32
// parameters, grad and weight: ~1.48 GB each, made once under $TMPDIR), against h5diff on the
// same files:
//
//   BM_CompareRecords/digests   compare_records(): every tensor decided by its digests
//   BM_CompareRecords/values    compare_records_with(ignore_digests): every value read (both
//                               files at once, kChunkBytes at a time, straight from the file)
//                               and compared bitwise
//   BM_H5Diff                   `h5diff -q A B` (hdf5-tools) as a subprocess
//
// Counters: GBps = bytes of both records / time. The files are read once untimed first, so every
// row reads from the page cache (the question is the comparator's cost, not the disk's).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/compare/compare.h"
#include "harness/record/record.h"
#include "harness/record/testing/small_step_record.h"

namespace {

namespace fs = std::filesystem;

/// The two records (written on first use, removed at exit) and their total size.
struct Records {
  std::string a = mtp::record::testing::bench_tmp_dir() + "/mtp_compare_benchmark_a.h5";
  std::string b = mtp::record::testing::bench_tmp_dir() + "/mtp_compare_benchmark_b.h5";
  double bytes = 0;

  Records() {
    for (const std::string& path : {a, b}) {
      mtp::record::testing::write_small_model_step(path, mtp::record::Storage::kFull);
    }
    bytes = static_cast<double>(fs::file_size(a) + fs::file_size(b));
    // Warm the page cache.
    std::vector<char> buffer(1 << 20);
    for (const std::string& path : {a, b}) {
      std::ifstream in(path, std::ios::binary);
      while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()))) {
      }
    }
  }
  ~Records() {
    std::error_code ec;
    fs::remove(a, ec);
    fs::remove(b, ec);
  }
};

Records& records() {
  static Records r;
  return r;
}

void BM_CompareRecords(benchmark::State& state, bool values) {
  Records& r = records();
  mtp::compare::Selection sel;
  sel.groups = {"grad", "weight"};
  mtp::compare::CompareOptions options;
  options.ignore_digests = values;
  for (auto _ : state) {
    mtp::record::RecordReader a(r.a), b(r.b);
    const auto result = mtp::compare::compare_records_with(
        a, b, mtp::compare::CompareClass::parse("bitwise"), sel, options);
    if (!result.equal) state.SkipWithError("identical records compared as different");
  }
  state.counters["GBps"] =
      benchmark::Counter(r.bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_H5Diff(benchmark::State& state) {
  Records& r = records();
  const std::string cmd = "h5diff -q '" + r.a + "' '" + r.b + "'";
  for (auto _ : state) {
    if (std::system(cmd.c_str()) != 0) state.SkipWithError(("failed: " + cmd).c_str());
  }
  state.counters["GBps"] =
      benchmark::Counter(r.bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_CompareRecords, digests, false)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CompareRecords, values, true)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_H5Diff)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
