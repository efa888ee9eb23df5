// Tests of `mtp-harness calibrate` and `mtp-harness simulate` on the CPU: calibrate writes every
// node kind of the tiny preset, simulate reads them and prices a standalone and a co-located
// layout (same work, other balance), its JSON agrees with its table, and bad input exits 2
// naming the flag or the rule.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/cli/cli_test_util.h"

namespace {

using mtp::cli_test::run;
using ::testing::HasSubstr;

TEST(SimCliTest, CalibrateThenSimulateTwoPlacements) {
  mtp::testing_util::ScratchDir dir;
  const std::string costs = dir.file("costs.json");
  auto r = run("calibrate --preset tiny --device cpu --repeats 2 --warmup 1 --out " + costs);
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json c = nlohmann::json::parse(mtp::testing_util::read_text(costs));
  EXPECT_EQ(c["schema_version"], 1);
  EXPECT_EQ(c["gpu"], "CPU");
  for (const char* n : {"embedding", "decoder_dense", "decoder_moe", "mtp_block_dense",
                        "mtp_block_moe", "final_layernorm", "output_head", "mtp_head"}) {
    ASSERT_TRUE(c["nodes"].contains(n)) << n;
    EXPECT_GT(c["nodes"][n]["forward_ms"].get<double>(), 0.0) << n;
  }
  EXPECT_EQ(c["measured_at"]["routed_experts_timed"], 4);
  // The whole program's host issue time beside its device time (on the CPU one clock: equal).
  EXPECT_THAT(c["notes"].dump(), HasSubstr("whole program with MTP per microbatch: forward "));
  EXPECT_THAT(r.out, HasSubstr("# whole program without MTP per microbatch: forward "));
  r = run("simulate --preset tiny --costs " + costs +
          " --pp 3 --microbatches 6 --layout 'Et|t|t|t||mL' --layout 'Et|t|t|t|m|L' --json " +
          dir.file("s.json") + " --html " + dir.file("s.html"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("Et|t|t|t|m|L"));
  EXPECT_THAT(r.out, HasSubstr("per pipeline rank"));
  const nlohmann::json s = nlohmann::json::parse(mtp::testing_util::read_text(dir.file("s.json")));
  ASSERT_EQ(s["layouts"].size(), 2u);
  EXPECT_DOUBLE_EQ(s["layouts"][0]["ratio_to_first"].get<double>(), 1.0);
  // The same work: the ranks' work sums agree; only the balance differs.
  double w0 = 0, w1 = 0;
  for (const auto& rk : s["layouts"][0]["ranks"]) w0 += rk["work_ms"].get<double>();
  for (const auto& rk : s["layouts"][1]["ranks"]) w1 += rk["work_ms"].get<double>();
  EXPECT_NEAR(w0, w1, 1e-9 * w0);
  EXPECT_THAT(mtp::testing_util::read_text(dir.file("s.html")), HasSubstr("<svg"));
}

// A faster claim that does not hold fails check (exit 1) with the simulated steps and the command
// that re-simulates it; nothing is trained for it.
TEST(SimCliTest, AFasterClaimThatDoesNotHoldFailsCheck) {
  mtp::testing_util::ScratchDir dir;
  std::string sc = mtp::testing_util::read_text(mtp::cli_test::tiny_scenario(dir));
  sc += R"([[expectation]]
name = "reversed"
class = "faster:0.9"
layouts = ["Ettt|(tt|)*29m|L", "Et|(tt|)*30mL"]
preset = "dsv3"
pp = 16
microbatches = 64
costs = "golden/perf/costs_h200_dsv3.json"
why = "the co-located layout is not faster: this claim is false on purpose"
)";
  std::ofstream(dir.file("f.toml")) << sc;
  const auto r = run("check " + dir.file("f.toml") + " --variant ref_p1 --out " + dir.file("o"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("SLOWER THAN CLAIMED: simulated step 15179.2 ms = 1.217 x "));
  EXPECT_THAT(r.out, HasSubstr("## reversed FAILED: layout Et|(tt|)*30mL vs Ettt|(tt|)*29m|L"));
  EXPECT_THAT(r.out, HasSubstr("# re-simulate: mtp-harness simulate --preset dsv3 --costs "
                               "golden/perf/costs_h200_dsv3.json --pp 16 --microbatches 64 "
                               "--layout 'Ettt|(tt|)*29m|L' --layout 'Et|(tt|)*30mL'"));
}

// Expert parallelism in a claim: the all-to-alls over InfiniBand priced, combined 1F1B hiding
// them (the dsv3 steps 15198.3 and 17518.3 ms that README quotes), and the re-simulate command
// carries the sizes; an EP that does not divide the experts is refused at its key.
TEST(SimCliTest, AFasterClaimWithExpertParallelismCarriesItsSizes) {
  mtp::testing_util::ScratchDir dir;
  const std::string base = mtp::testing_util::read_text(mtp::cli_test::tiny_scenario(dir));
  std::string sc = base + R"([[expectation]]
name = "reversed_ep"
class = "faster:0.9"
layouts = ["Ettt|(tt|)*29m|L", "Et|(tt|)*30mL"]
preset = "dsv3"
pp = 16
microbatches = 64
schedule = "combined_1f1b"
ep = 64
collective_link = "ib"
costs = "golden/perf/costs_h200_dsv3.json"
why = "false on purpose"
)";
  std::ofstream(dir.file("f.toml")) << sc;
  auto r = run("check " + dir.file("f.toml") + " --variant ref_p1 --out " + dir.file("o"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("SLOWER THAN CLAIMED: simulated step 17518.3 ms = 1.153 x 15198.3"));
  EXPECT_THAT(r.out, HasSubstr("--schedule combined_1f1b --ep 64 --collective-link ib --layout"));
  std::string bad = sc;
  bad.replace(bad.find("ep = 64"), 7, "ep = 3");
  std::ofstream(dir.file("b.toml")) << bad;
  r = run("check " + dir.file("b.toml") + " --variant ref_p1 --out " + dir.file("o2"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("b.toml"));
  EXPECT_THAT(r.out, HasSubstr("expectation \"reversed_ep\": ep = 3 needs num_moe_experts (256) "
                               "to be a multiple of ep"));
  r =
      run("simulate --preset dsv3 --costs golden/perf/costs_h200_dsv3.json --pp 16 "
          "--microbatches 64 --cp 2 --ep 8 --collective-link ib --layout 'Et|(tt|)*30mL' --json " +
          dir.file("s.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("CP 2, EP 8 (collectives over ib 50 GB/s, 5 us)"));
  const nlohmann::json s = nlohmann::json::parse(mtp::testing_util::read_text(dir.file("s.json")));
  EXPECT_EQ(s["context_parallel_size"], 2);
  EXPECT_EQ(s["expert_parallel_size"], 8);
  EXPECT_EQ(s["collective_link"]["name"], "ib");
  EXPECT_GT(s["layouts"][0]["most_loaded_stage_collective_ms"].get<double>(), 0.0);
  EXPECT_GT(s["layouts"][0]["most_loaded_stage_ms"].get<double>(),
            s["layouts"][0]["most_loaded_stage_collective_ms"].get<double>());
  EXPECT_GT(s["layouts"][0]["most_loaded_stage_all_to_all_ms"].get<double>(), 0.0);
  r =
      run("simulate --preset small --costs golden/perf/costs_h200_small.json --pp 4 "
          "--microbatches 8 --ep 2 --layout 'Et*2|t*2|t*2|t*2mL'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--ep 2: needs an MoE model"));
  r =
      run("simulate --preset dsv3 --costs golden/perf/costs_h200_dsv3.json --pp 16 "
          "--microbatches 64 --collective-link ib --layout 'Et|(tt|)*30mL'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--collective-link prices the CP and EP collectives"));
  bad = sc;
  bad.replace(bad.find("ep = 64\n"), 8, "");
  std::ofstream(dir.file("l.toml")) << bad;
  r = run("check " + dir.file("l.toml") + " --variant ref_p1 --out " + dir.file("o3"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("collective_link prices the CP and EP collectives: set cp or ep"));
}

// A replicas expectation on a variant without copies (P = 1, DP = 1) fails with a note, never
// a crash, and the other expectations' report is written.
TEST(SimCliTest, ReplicasOnAVariantWithoutCopiesFailsCleanly) {
  mtp::testing_util::ScratchDir dir;
  std::string sc = mtp::testing_util::read_text(mtp::cli_test::tiny_scenario(dir));
  sc.replace(sc.find("[training]\n"), 11, "[training]\nrecord_copies = true\n");
  sc += R"([[expectation]]
name = "copies"
variants = ["ref_p1"]
class = "replicas"
why = "one rank holds one copy of each parameter: nothing to check, and that is not a pass"
)";
  std::ofstream(dir.file("r.toml")) << sc;
  const auto r = run("check " + dir.file("r.toml") + " --variant ref_p1 --out " + dir.file("o"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("## copies FAILED: ref_p1 (copies against the recorded copy)"));
  EXPECT_THAT(r.out, HasSubstr("no copies group"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("o/report.json"))) << r.out;
}

// calibrate --validate with a costs file: the simulated busy column is the simulator's (the same
// numbers simulate --json gives for those costs), every rank's op sum is measured (> 0), a
// co-located layout runs on the reference and a standalone one on the candidate, and the verdict
// follows --tolerance (0 cannot hold: exit 1 naming the worst rank).
TEST(SimCliTest, ValidateSetsMeasuredOpSumsBesideTheSimulatedOnes) {
  mtp::testing_util::ScratchDir dir;
  const std::string costs = dir.file("costs.json");
  std::ofstream(costs) << R"({"schema_version": 1, "nodes": {
    "embedding": {"forward_ms": 0.5, "backward_ms": 0.5},
    "decoder_dense": {"forward_ms": 1, "backward_ms": 2},
    "decoder_moe": {"forward_ms": 1.5, "backward_ms": 3},
    "mtp_block_dense": {"forward_ms": 2, "backward_ms": 4},
    "mtp_block_moe": {"forward_ms": 2.5, "backward_ms": 5},
    "final_layernorm": {"forward_ms": 0.25, "backward_ms": 0.25},
    "output_head": {"forward_ms": 1, "backward_ms": 1},
    "mtp_head": {"forward_ms": 1, "backward_ms": 1}}})";
  const std::string layouts = " --layout 'E|t|t|t|t|||mL' --layout 'E|t|t|t|t||m|L'";
  auto r = run("simulate --preset tiny --costs " + costs + " --pp 4 --microbatches 4" + layouts +
               " --json " + dir.file("s.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json s = nlohmann::json::parse(mtp::testing_util::read_text(dir.file("s.json")));
  r = run("calibrate --preset tiny --device cpu --costs " + costs +
          " --pp 4 --microbatches 4 --repeats 1 --warmup 0 --tolerance 10"
          " --validate 'E|t|t|t|t|||mL' --validate 'E|t|t|t|t||m|L'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out,
              HasSubstr("# validate 'E|t|t|t|t|||mL' (reference): P = 4, V = 2, interleaved"));
  EXPECT_THAT(r.out, HasSubstr("# validate 'E|t|t|t|t||m|L' (candidate)"));
  std::istringstream lines(r.out);
  std::string line;
  int layout = -1, rows = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("# validate", 0) == 0) ++layout;
    std::istringstream row(line);
    int rank = -1;
    double simulated = 0, measured = 0, ratio = 0;
    std::string extra;
    if (layout < 0 || !(row >> rank >> simulated >> measured >> ratio) || (row >> extra)) continue;
    ASSERT_LT(rank, 4) << line;
    const double want = s["layouts"][layout]["ranks"][rank]["busy_ms"].get<double>();
    EXPECT_NEAR(simulated, want, 0.0005) << line;
    EXPECT_GT(measured, 0.0) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 8) << r.out;
  EXPECT_THAT(r.out, HasSubstr("# PASS: every rank's measured op sum within 1000 %"));
  r = run("calibrate --preset tiny --device cpu --costs " + costs +
          " --pp 2 --microbatches 4 --repeats 1 --warmup 0 --tolerance 0 --validate 'Et|t|t|tmL'");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("# FAIL: every rank's measured op sum within 0 % of the simulated "
                               "busy time? no (worst: rank "));
}

TEST(SimCliTest, BadInputExitsTwo) {
  mtp::testing_util::ScratchDir dir;
  const std::string costs = dir.file("costs.json");
  std::ofstream(costs)
      << R"({"schema_version": 1, "nodes": {"embedding": {"forward_ms": 1, "backward_ms": 1}}})";
  auto r = run("simulate --preset tiny --costs " + costs +
               " --pp 3 --microbatches 6 --layout 'Et|t|t|t|m|L'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("the costs have no node \"decoder_dense\""));
  r = run("simulate --preset tiny --costs " + costs +
          " --pp 2 --microbatches 6 --layout 'Et|tt|t|m|L|'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("rule R3"));
  r = run("simulate --costs " + costs + " --pp 2 --microbatches 6 --layout 'Et|tmL'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("exactly one of --preset and --scenario"));
  r = run("simulate --preset dsv4 --costs " + costs + " --pp 2 --microbatches 6 --layout 'Et|tmL'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--preset: preset \"dsv4\": accepted: dsv3, small, tiny"));
  r = run("simulate --preset tiny --costs " + dir.file("none.json") +
          " --pp 2 --microbatches 6 --layout 'Et|tmL'");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run("simulate --preset tiny --costs " + costs +
          " --pp 2 --microbatches 6 --layout 'Ett|ttmL' --schedule 1f1b --group 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("1f1b schedule: a microbatch group size (N=2) applies to the "
                               "interleaved and combined 1F1B schedules only"));
  r = run("calibrate --preset tiny --device cpu --out /proc/x.json");
  EXPECT_EQ(r.code, 2) << r.out;
  // --validate needs --pp (and --pp --validate); --costs replaces --out; one of them is needed.
  for (const std::string& args : std::vector<std::string>{
           "--out x.json --validate 'Et|tmL'", "--out x.json --pp 2", "--validate 'Et|tmL' --pp 2",
           "--out x.json --costs " + costs + " --validate 'Et|tmL' --pp 2"}) {
    r = run("calibrate --preset tiny --device cpu " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  }
  r = run("calibrate --preset tiny --device cpu --costs " + costs +
          " --validate 'Et|t|t|tmL' --pp 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("the costs have no node \"decoder_dense\""));
  // A --validate run the planner refuses is refused before anything is timed: no --out file.
  const std::string never = dir.file("never_written.json");
  r = run("calibrate --preset tiny --device cpu --repeats 1 --warmup 0 --out " + never +
          " --validate 'E|t|tL' --pp 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--validate E|t|tL: "));
  EXPECT_FALSE(std::filesystem::exists(never));
  // --cuda-graphs: only on CUDA, and graphed costs only for a dense model (refused before
  // calibrating: no --out file).
  const std::string graphed = dir.file("graphed.json");
  r = run("calibrate --preset tiny --device cpu --out " + graphed + " --cuda-graphs");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("CUDA graphs need --device cuda"));
  r = run("calibrate --preset tiny --device cuda --out " + graphed + " --cuda-graphs");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("calibrate --cuda-graphs: preset \"tiny\" has MoE layers; the "
                               "stage layouts price dense layers only (and CUDA graphs cannot "
                               "hold MoE"));
  EXPECT_FALSE(std::filesystem::exists(graphed));
  // --from-stages (eager stage ops, any device): dense models with MTP only, refused before
  // calibrating; it calibrates, so --costs (validate only) excludes it.
  r = run("calibrate --preset tiny --device cpu --out " + graphed + " --from-stages");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("calibrate --from-stages: preset \"tiny\" has MoE layers; the "
                               "stage layouts price dense layers only: calibrate it without "
                               "--from-stages"));
  EXPECT_FALSE(std::filesystem::exists(graphed));
  r = run("calibrate --preset tiny --device cpu --costs " + costs +
          " --validate 'E|t|t|t|t|||mL' --pp 4 --from-stages");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--costs excludes --from-stages"));
  r = run("calibrate --preset small --device cuda --out " + graphed + " --cuda-graphs --warmup 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--warmup 1 must be at least 2"));
  EXPECT_FALSE(std::filesystem::exists(graphed));
  r = run("calibrate --preset tiny --device cpu --costs " + costs +
          " --validate 'E|t|t|t|t|||mL' --pp 4 --cuda-graphs");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("CUDA graphs need --device cuda"));
  // A costs path that is a device or a FIFO is refused before any read (no hang).
  r = run("simulate --preset tiny --costs /dev/zero --pp 2 --microbatches 6 --layout 'Et|tmL'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("costs file '/dev/zero' is not a regular file"));
  // A plan past the simulator's op bound is refused before its op lists are built.
  r = run("simulate --preset tiny --costs " + costs +
          " --pp 2 --microbatches 100000 --layout 'Et*4" + std::string(199, '|') +
          "mL'");  // 200 stages (V 100)
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("make 40000000 ops"));
  // A DeepSeek-V3 slice on this CPU: refused before any weight is allocated, no --out file.
  const std::string big = dir.file("dsv3_cpu.json");
  r = run("calibrate --preset dsv3 --device cpu --out " + big);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("calibrate: the timed model (layout E|t|tt|L, H 7168"));
  EXPECT_THAT(r.out, HasSubstr("time this preset on a GPU, --device cuda"));
  EXPECT_FALSE(std::filesystem::exists(big));
}

}  // namespace
