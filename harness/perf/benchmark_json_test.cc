// read_benchmark_json / merge_benchmark_json on Google Benchmark JSON written as 1.7.1 writes
// it (--benchmark_repetitions=N --benchmark_out_format=json), and on broken files.
#include "harness/perf/benchmark_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/common/error.h"

namespace mtp::perf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Two repetitions of a manual-time benchmark in ms, their aggregates, a benchmark skipped with
// an error, and one in us; a context with --benchmark_context keys and a non-finite counter.
constexpr const char* kRun = R"({
  "context": {"date": "2026-12-01T10:00:00+00:00", "num_cpus": 32, "cpu_scaling_enabled": false,
              "caches": [{"type": "Data", "level": 1}], "gpu": "NVIDIA H200", "driver": "580.1"},
  "benchmarks": [
    {"name": "BM_A/cuda/manual_time", "run_type": "iteration", "repetitions": 2,
     "repetition_index": 0, "iterations": 5, "real_time": 1.5, "cpu_time": 0.1,
     "time_unit": "ms", "tokens_per_second": Infinity},
    {"name": "BM_A/cuda/manual_time", "run_type": "iteration", "repetitions": 2,
     "repetition_index": 1, "iterations": 5, "real_time": 2.5, "cpu_time": 0.1,
     "time_unit": "ms", "x": NaN, "y": -Infinity, "label": "NaN in a string"},
    {"name": "BM_A/cuda/manual_time_mean", "run_type": "aggregate", "aggregate_name": "mean",
     "real_time": 2.0, "cpu_time": 0.1, "time_unit": "ms"},
    {"name": "BM_A/cuda/manual_time_median", "run_type": "aggregate", "aggregate_name": "median",
     "real_time": 2.0, "cpu_time": 0.1, "time_unit": "ms"},
    {"name": "BM_B/cuda", "run_type": "iteration", "error_occurred": true,
     "error_message": "no CUDA device", "iterations": 0, "real_time": 0, "cpu_time": 0,
     "time_unit": "ns"},
    {"name": "BM_C", "run_type": "iteration", "real_time": 7, "cpu_time": 7, "time_unit": "us"}
  ]
})";

/// Writes `text` to a file of the temporary directory unique to the running test and `name`.
std::string write(const std::string& name, const std::string& text) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto path = std::filesystem::path(::testing::TempDir()) /
                    (std::string("perf_json_") + info->name() + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& text) {
  try {
    parse_benchmark_json(text, "run.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BenchmarkJsonTest, RepetitionsInNanosecondsAggregatesSkipped) {
  const BenchmarkFile f = parse_benchmark_json(kRun, "run.json");
  EXPECT_EQ(f.path, "run.json");
  ASSERT_EQ(f.benchmarks.size(), 3u);
  EXPECT_EQ(f.benchmarks[0].name, "BM_A/cuda/manual_time");
  EXPECT_THAT(f.benchmarks[0].real_time_ns, ElementsAre(1.5e6, 2.5e6));
  EXPECT_EQ(f.benchmarks[0].error, "");
  EXPECT_EQ(f.benchmarks[1].name, "BM_B/cuda");
  EXPECT_TRUE(f.benchmarks[1].real_time_ns.empty());
  EXPECT_EQ(f.benchmarks[1].error, "no CUDA device");
  EXPECT_THAT(f.benchmarks[2].real_time_ns, ElementsAre(7000.0));
  EXPECT_EQ(f.aggregates_skipped, 2u);
  EXPECT_EQ(f.context.at("gpu"), "NVIDIA H200");
  EXPECT_EQ(f.context.at("num_cpus"), "32");
  EXPECT_EQ(f.context.at("cpu_scaling_enabled"), "false");
  EXPECT_EQ(f.context.count("caches"), 0u);
}

TEST(BenchmarkJsonTest, BadFilesNameTheFileAndTheProblem) {
  EXPECT_THAT(error_of("{\"benchmarks\": [1, 2"),
              HasSubstr("run.json: line 1, column 21 (byte 20): not valid JSON: syntax error"));
  EXPECT_THAT(error_of("[]"), HasSubstr("run.json: not Google Benchmark JSON"));
  EXPECT_THAT(error_of("{\"context\": {}}"), HasSubstr("no \"benchmarks\" array"));
  EXPECT_THAT(error_of("{\"benchmarks\": [{\"real_time\": 1}]}"),
              HasSubstr("benchmarks[0] has no string \"name\""));
  EXPECT_THAT(error_of(R"({"benchmarks": [{"name": "X", "real_time": -1, "time_unit": "ns"}]})"),
              HasSubstr("benchmarks[0] (\"X\") has no finite, non-negative \"real_time\""));
  EXPECT_THAT(error_of(R"({"benchmarks": [{"name": "X", "real_time": NaN, "time_unit": "ns"}]})"),
              HasSubstr("(\"X\") has no finite"));
  EXPECT_THAT(error_of(R"({"benchmarks": [{"name": "X", "real_time": 1, "time_unit": "min"}]})"),
              HasSubstr("has no \"time_unit\" of ns, us, ms or s"));
  EXPECT_THAT(error_of(R"({"benchmarks": [{"name": "X_mean", "run_type": "aggregate",
                                          "real_time": 1, "time_unit": "ns"}]})"),
              HasSubstr("no per-repetition results"));
  EXPECT_THAT(error_of(R"({"benchmarks": []})"), HasSubstr("--benchmark_repetitions"));
}

TEST(BenchmarkJsonTest, ReadNamesAMissingFile) {
  try {
    read_benchmark_json("/nonexistent/base.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("benchmark JSON '/nonexistent/base.json' does not exist"));
  }
  EXPECT_EQ(read_benchmark_json(write("run.json", kRun)).benchmarks.size(), 3u);
}

TEST(BenchmarkJsonTest, FingerprintIsGpuAndDriver) {
  const BenchmarkFile a = parse_benchmark_json(kRun, "a.json");
  BenchmarkFile b = a;
  b.context["date"] = "another day";
  EXPECT_TRUE(fingerprint_mismatches(a, b).empty());
  b.context["driver"] = "590.2";
  b.context.erase("gpu");
  EXPECT_THAT(fingerprint_mismatches(a, b),
              ElementsAre("gpu: NVIDIA H200 vs (none)", "driver: 580.1 vs 590.2"));
}

TEST(BenchmarkJsonTest, MergeConcatenatesUnderTheFirstContext) {
  const std::string a = write("a.json", kRun);
  const std::string b = write("b.json", R"({"context": {"gpu": "NVIDIA H200", "driver": "580.1",
      "executable": "b"}, "benchmarks": [{"name": "BM_D", "real_time": 3, "time_unit": "ns"},
      {"name": "BM_D", "real_time": 4, "time_unit": "ns"}]})");
  const BenchmarkFile m = parse_benchmark_json(merge_benchmark_json({a, b}), "merged.json");
  ASSERT_EQ(m.benchmarks.size(), 4u);
  EXPECT_EQ(m.benchmarks[3].name, "BM_D");
  EXPECT_THAT(m.benchmarks[3].real_time_ns, ElementsAre(3.0, 4.0));
  EXPECT_EQ(m.aggregates_skipped, 2u);
  EXPECT_EQ(m.context.at("date"), "2026-12-01T10:00:00+00:00");
  EXPECT_EQ(m.context.count("executable"), 0u);
}

TEST(BenchmarkJsonTest, MergeRefusesOtherMachinesAndDuplicateNames) {
  const std::string a = write("a.json", kRun);
  const std::string other = write("other.json", R"({"context": {"gpu": "NVIDIA A100",
      "driver": "580.1"}, "benchmarks": [{"name": "BM_D", "real_time": 3, "time_unit": "ns"}]})");
  EXPECT_THAT(
      [&] {
        merge_benchmark_json({a, other});
      },
      ::testing::ThrowsMessage<InputError>(HasSubstr("gpu: NVIDIA H200 vs NVIDIA A100")));
  EXPECT_THAT(
      [&] {
        merge_benchmark_json({a, a});
      },
      ::testing::ThrowsMessage<InputError>(
          HasSubstr("benchmark \"BM_A/cuda/manual_time\" is in both")));
  EXPECT_THROW(merge_benchmark_json({}), InputError);
}

// Issue 19 defect 3: a document nested 100,000 deep crashed `perf merge` (SIGSEGV); at depth
// 30,000 a 60 KB input made a 1.8 GB output. Defect 7: the number 1e400 was nlohmann's
// out_of_range (exit 3). Each is now an InputError naming the file and the position.
TEST(BenchmarkJsonTest, DeepNestingAndHugeNumbersAreInputErrorsWithThePosition) {
  const std::string deep = "{\"context\": " + std::string(100000, '[') + std::string(100000, ']') +
                           ", \"benchmarks\": []}";
  EXPECT_EQ(error_of(deep),
            "run.json: line 1, column 76 (byte 75): nesting deeper than 64 levels "
            "of arrays and objects");
  const std::string d30k = write("d30k.json",
                                 "{\"benchmarks\": [{\"name\": \"BM_X\", \"real_time\": "
                                 "1, \"time_unit\": \"ns\", \"x\": " +
                                     std::string(30000, '[') + std::string(30000, ']') + "}]}");
  EXPECT_THAT([&] { merge_benchmark_json({d30k}); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("nesting deeper than 64 levels")));
  EXPECT_EQ(error_of(R"({"benchmarks": [{"name": "X", "real_time": 1e400, "time_unit": "ns"}]})"),
            "run.json: line 1, column 44 (byte 43): number overflow parsing '1e400' (a JSON "
            "number must be a finite double)");
}

// What merge writes is nlohmann's dump(2) of the merged document, and never more than 4 times
// its inputs (+ 1 MiB): 64 levels of indentation around packed values would be 130 times.
TEST(BenchmarkJsonTest, MergedOutputIsDumpTwoAndBoundedByItsInputs) {
  const std::string a = write("a.json", kRun);
  const std::string merged = merge_benchmark_json({a});
  EXPECT_EQ(merged, nlohmann::json::parse(merged).dump(2) + "\n");
  std::string packed = "0";
  for (int i = 0; i < 40000; ++i) packed += ",0";
  const std::string wide = write("wide.json",
                                 "{\"benchmarks\": [{\"name\": \"BM_X\", "
                                 "\"real_time\": 1, \"time_unit\": \"ns\", \"x\": " +
                                     std::string(60, '[') + packed + std::string(60, ']') + "}]}");
  EXPECT_THAT([&] { merge_benchmark_json({wide}); },
              ::testing::ThrowsMessage<InputError>(HasSubstr(
                  "perf merge: the merged JSON would be more than 1369364 bytes (4 × the inputs' "
                  "size + 1 MiB)")));
}

}  // namespace
}  // namespace mtp::perf
