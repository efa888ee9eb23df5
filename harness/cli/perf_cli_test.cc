// End-to-end checks of `mtp-harness perf compare`, `perf merge` and `perf ab`: exit codes 0 / 1 /
// 2 / 3, the table, the fingerprint refusal, --json, interleaved runs of two programs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli/cli_test_util.h"

namespace {

using mtp::cli_test::run;
using ::testing::HasSubstr;

/// A path in the temporary directory, unique to the running test (CTest runs tests in parallel).
std::string temp_path(const std::string& name) {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  return (std::filesystem::path(testing::TempDir()) /
          (std::string("perf_cli_") + info->name() + "_" + name))
      .string();
}

/// A Google Benchmark JSON file of one benchmark "BM_Step/cuda/manual_time" with these
/// repetitions (ms), written to temp_path(name).
std::string bench_file(const std::string& name, const std::vector<double>& ms,
                       const std::string& gpu = "NVIDIA H200") {
  nlohmann::json j;
  j["context"] = {{"gpu", gpu}, {"driver", "580.159.04"}};
  j["benchmarks"] = nlohmann::json::array();
  for (size_t i = 0; i < ms.size(); ++i) {
    j["benchmarks"].push_back({{"name", "BM_Step/cuda/manual_time"},
                               {"run_type", "iteration"},
                               {"repetition_index", i},
                               {"real_time", ms[i]},
                               {"cpu_time", 0.1},
                               {"time_unit", "ms"}});
  }
  const std::string path = temp_path(name);
  std::ofstream(path) << j.dump(2);
  return path;
}

const std::vector<double> kBase{100, 101, 99, 98, 102};
const std::vector<double> kSlow{120, 119, 121, 122, 118};

TEST(PerfCliTest, NoRegressionExitsZero) {
  const std::string base = bench_file("base.json", kBase);
  const auto r = run("perf compare " + base + " " + base);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("BM_Step/cuda/manual_time"));
  EXPECT_THAT(r.out, HasSubstr("unchanged"));
  EXPECT_THAT(r.out, HasSubstr("no regression"));
}

TEST(PerfCliTest, RegressionExitsOneAndWritesJson) {
  const std::string base = bench_file("base.json", kBase);
  const std::string slow = bench_file("slow.json", kSlow);
  const std::string json = temp_path("compare.json");
  const auto r = run("perf compare " + base + " " + slow + " --json " + json);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("+20.0 %"));
  EXPECT_THAT(r.out, HasSubstr("REGRESSION"));
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["regressed"], true);
  EXPECT_EQ(j["rows"][0]["verdict"], "REGRESSION");
  // Above the threshold only when it is raised past 20 %.
  EXPECT_EQ(run("perf compare " + base + " " + slow + " --threshold 0.25").code, 0);
  // Not significant at alpha 0.01 with 5 vs 5 repetitions (smallest p 0.0122).
  EXPECT_EQ(run("perf compare " + base + " " + slow + " --alpha 0.01").code, 0);
}

TEST(PerfCliTest, BadInputExitsTwoNamingTheFile) {
  const std::string base = bench_file("base.json", kBase);
  const auto missing = run("perf compare " + base + " /nonexistent/new.json");
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_THAT(missing.out, HasSubstr("benchmark JSON '/nonexistent/new.json' does not exist"));
  const auto broken_path = temp_path("broken.json");
  std::ofstream(broken_path) << "{\"benchmarks\": [";
  const auto broken = run("perf compare " + base + " " + broken_path);
  EXPECT_EQ(broken.code, 2) << broken.out;
  EXPECT_THAT(broken.out, HasSubstr("broken.json: line 1, column 17 (byte 16): not valid JSON"));
  const auto threshold = run("perf compare " + base + " " + base + " --threshold -1");
  EXPECT_EQ(threshold.code, 2) << threshold.out;
  EXPECT_THAT(threshold.out, HasSubstr("--threshold -1 must be"));
  EXPECT_EQ(run("perf compare " + base + " " + base + " --alpha 1").code, 2);
  EXPECT_EQ(run("perf compare " + base).code, 2);
  EXPECT_EQ(run("perf frobnicate").code, 2);
}

TEST(PerfCliTest, RefusesAnotherMachinesBaselineUnlessAllowed) {
  const std::string base = bench_file("base.json", kBase);
  const std::string other = bench_file("a100.json", kSlow, "NVIDIA A100-SXM4-80GB");
  const auto refused = run("perf compare " + base + " " + other);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("different machines (gpu: NVIDIA H200 vs NVIDIA "
                                     "A100-SXM4-80GB)"));
  EXPECT_THAT(refused.out, HasSubstr("--allow-fingerprint-mismatch"));
  const auto allowed = run("perf compare " + base + " " + other + " --allow-fingerprint-mismatch");
  EXPECT_EQ(allowed.code, 1) << allowed.out;
  EXPECT_THAT(allowed.out, HasSubstr("# warning: different machines"));
}

TEST(PerfCliTest, MergeThenCompare) {
  const std::string base = bench_file("base.json", kBase);
  nlohmann::json other;
  other["context"] = {{"gpu", "NVIDIA H200"}, {"driver", "580.159.04"}};
  other["benchmarks"] = {{{"name", "BM_Other"}, {"real_time", 5}, {"time_unit", "us"}},
                         {{"name", "BM_Other"}, {"real_time", 6}, {"time_unit", "us"}}};
  const auto other_path = temp_path("other.json");
  std::ofstream(other_path) << other.dump();
  const std::string merged = temp_path("merged.json");
  const auto m = run("perf merge " + base + " " + other_path + " --out " + merged);
  ASSERT_EQ(m.code, 0) << m.out;
  const auto r = run("perf compare " + merged + " " + base);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("BM_Other"));
  EXPECT_THAT(r.out, HasSubstr("missing (not in the contender)"));
  EXPECT_EQ(run("perf merge " + base + " " + base + " --out " + merged).code, 2);
}

}  // namespace

namespace {

/// A stand-in for a Google Benchmark program at temp_path(name): it writes one repetition of
/// "BM_X" whose real time is `base` + (its run count mod 3) ns to its --benchmark_out file, and
/// records its arguments; `fail` makes it exit 3 instead.
std::string fake_benchmark(const std::string& name, int base, bool fail = false) {
  const std::string path = temp_path(name);
  std::ofstream(path) << "#!/bin/sh\n"
                      << (fail ? "echo 'out of memory' >&2; exit 3\n" : "")
                      << "out=''\nfor a in \"$@\"; do case $a in --benchmark_out=*) "
                         "out=${a#--benchmark_out=};; esac; done\n"
                      << "n=$(cat " << path
                      << ".count 2>/dev/null || echo 0); n=$((n+1)); echo $n > " << path
                      << ".count\necho \"$@\" >> " << path << ".args\n"
                      << "printf '{\"context\":{},\"benchmarks\":[{\"name\":\"BM_X\",\"run_type\":"
                         "\"iteration\",\"real_time\":%s,\"cpu_time\":1,\"time_unit\":\"ns\"}]}' "
                      << "$((" << base << " + n % 3)) > \"$out\"\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  std::filesystem::remove(path + ".count");
  std::filesystem::remove(path + ".args");
  return path;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// Two builds' programs run interleaved on one machine, one repetition a run: B 30 % slower is a
// regression (exit 1, named last); the same program against itself is not (exit 0).
TEST(PerfAbTest, InterleavedRunsOfTwoBuildsAreComparedWithTheUTest) {
  const std::string a = fake_benchmark("a.sh", 100), b = fake_benchmark("b.sh", 130);
  const auto slower =
      run("perf ab " + a + " " + b + " --rounds 6 --filter 'BM_X' --json " + temp_path("ab.json"));
  EXPECT_EQ(slower.code, 1) << slower.out;
  EXPECT_THAT(slower.out, HasSubstr("# perf ab: 6 rounds, A and B alternating"));
  EXPECT_THAT(slower.out, HasSubstr("# REGRESSION: BM_X (+29.7 %)"));
  EXPECT_EQ(count_lines(read_all(a + ".args")), 6u);
  EXPECT_THAT(read_all(a + ".args"), HasSubstr("--benchmark_repetitions=1"));
  EXPECT_THAT(read_all(a + ".args"), HasSubstr("--benchmark_filter=BM_X"));
  EXPECT_EQ(nlohmann::json::parse(read_all(temp_path("ab.json")))["regressed"], true);
  const std::string a2 = fake_benchmark("a2.sh", 100);
  EXPECT_EQ(run("perf ab " + a + " " + a2 + " --rounds 6").code, 0);
}

TEST(PerfAbTest, BadProgramsAndFailedRunsAreNamed) {
  const std::string a = fake_benchmark("a.sh", 100), bad = fake_benchmark("bad.sh", 1, true);
  const auto failed = run("perf ab " + a + " " + bad + " --rounds 2");
  EXPECT_EQ(failed.code, 3) << failed.out;
  EXPECT_THAT(failed.out, HasSubstr(bad + " exited with 3"));
  EXPECT_THAT(failed.out, HasSubstr("out of memory"));
  const auto missing = run("perf ab " + a + " /nonexistent/bench --rounds 2");
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_THAT(missing.out, HasSubstr("BIN_B /nonexistent/bench: not an executable file"));
  EXPECT_EQ(run("perf ab " + a + " " + a + " --rounds 1").code, 2);
  // A run that hangs is killed after --timeout, never waited for forever.
  const std::string hang = temp_path("hang.sh");
  std::ofstream(hang) << "#!/bin/sh\nexec sleep 60\n";
  std::filesystem::permissions(hang, std::filesystem::perms::owner_all);
  const auto hung = run("perf ab " + a + " " + hang + " --rounds 2 --timeout 2");
  EXPECT_EQ(hung.code, 3) << hung.out;
  EXPECT_THAT(hung.out, HasSubstr(hang + " ran past --timeout 2 s and was killed"));
  // A program that exits 0 without results (a filter matching nothing) is a failed run, named.
  const std::string empty = temp_path("empty.sh");
  std::ofstream(empty) << "#!/bin/sh\necho 'Failed to match any benchmarks'\n";
  std::filesystem::permissions(empty, std::filesystem::perms::owner_all);
  const auto none = run("perf ab " + a + " " + empty + " --rounds 2");
  EXPECT_EQ(none.code, 3) << none.out;
  EXPECT_THAT(none.out, HasSubstr("(BIN_B) wrote no usable benchmark JSON"));
  EXPECT_THAT(none.out, HasSubstr("Failed to match any benchmarks"));
}

}  // namespace
