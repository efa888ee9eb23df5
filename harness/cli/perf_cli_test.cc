// End-to-end checks of `mtp-harness perf compare` and `perf merge`: exit codes 0 / 1 / 2, the
// table, the fingerprint refusal, --json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli/cli_test_util.h"

namespace {

using ::testing::HasSubstr;
using mtp::cli_test::run;

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
  EXPECT_THAT(broken.out, HasSubstr("broken.json: not valid JSON"));
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
