// End-to-end checks of issue 9's command line: CI-safe check output (skipped expectations,
// JUnit per pair and on bad input, run directories), digest records and compare --localize,
// goldens, equiv, info's losses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "harness/cli/cli_test_util.h"
#include "harness/common/test_util.h"

namespace {

namespace fs = std::filesystem;
using mtp::cli_test::run;
using mtp::testing_util::read_text;
using mtp::testing_util::ScratchDir;
using ::testing::HasSubstr;
using ::testing::Not;

using mtp::cli_test::tiny_scenario;

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CheckOutputTest, NothingEvaluatedIsNotAPassUnlessAllowed) {
  ScratchDir dir;
  const std::string junit = dir.file("junit.xml");
  const auto r = run("check scenarios/default.toml --variant ref_p1 --out " + dir.file("o") +
                     " --junit " + junit);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("nothing was proven"));
  EXPECT_THAT(r.out, HasSubstr("0 passed, 0 failed, 11 skipped"));
  EXPECT_THAT(r.out, HasSubstr("SKIP"));
  const std::string x = read_text(junit);
  EXPECT_THAT(x, HasSubstr("skipped=\"43\""));  // one test case per pair that was not compared
  EXPECT_EQ(count(x, "<skipped "), 43);         // 13 pairs, 10 variants × 3 oracle
  EXPECT_THAT(x, HasSubstr("not evaluated: variant(s) ref_p4v2 not run"));
  const auto j = nlohmann::json::parse(read_text(dir.file("o/report.json")));
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["verdict"], "nothing evaluated");
  EXPECT_EQ(j["counts"]["skipped"], 11);
  EXPECT_EQ(j["expectations"][0]["status"], "skipped");
  EXPECT_EQ(
      run("check scenarios/default.toml --variant ref_p1 --allow-skipped --out " + dir.file("o"))
          .code,
      0);
}

TEST(CheckOutputTest, JUnitHasOneCasePerPairAndTheHtmlNamesTheFirstDivergence) {
  ScratchDir dir;
  const std::string sc = tiny_scenario(dir);
  const auto r = run("check " + sc + " --out " + dir.file("o") + " --junit " + dir.file("j.xml"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("## p1_fails FAILED: ref_p2 vs ref_p1"));
  // The failing pair names the owner of the first divergence and how to re-train both.
  EXPECT_THAT(r.out, HasSubstr("is owned by stage 0 (pipeline rank 0, virtual stage 0) in "
                               "ref_p2"));
  EXPECT_THAT(r.out, HasSubstr("# re-train ref_p1: mtp-harness run " + sc +
                               " --variant ref_p1 --out " + dir.file("o") + "/ref_p1.retrain.h5"));
  const std::string x = read_text(dir.file("j.xml"));
  EXPECT_EQ(count(x, "<testcase "), 2);
  EXPECT_THAT(x, HasSubstr("tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\""));
  EXPECT_THAT(x, HasSubstr("name=\"placement/ref_p2_vs_cand_p2\""));
  EXPECT_THAT(x, HasSubstr("name=\"p1_fails/ref_p2_vs_ref_p1\""));
  EXPECT_TRUE(std::regex_search(x, std::regex("time=\"[0-9]+\\.[0-9]{3}\"")));
  // (Which step differs first depends on the BLAS: here the two sums of the embedding's uses
  // agree at step 1 and differ at step 2.)
  EXPECT_TRUE(std::regex_search(x, std::regex("<failure message=\"ref_p2 vs ref_p1 \\(bitwise\\): "
                                              "FAILS bitwise: [0-9]+ of [0-9]+ tensors outside the "
                                              "class; first step [12] "
                                              "grad/embedding\\.word_embeddings\\.weight")))
      << x;
  const std::string html = read_text(dir.file("o/report.html"));
  EXPECT_THAT(html, HasSubstr("first divergence"));
  EXPECT_THAT(html, HasSubstr("stage 0 (pipeline rank 0, virtual stage 0)"));
  EXPECT_THAT(html, Not(HasSubstr("http://")));
  const auto j = nlohmann::json::parse(read_text(dir.file("o/report.json")));
  const auto& pair = j["expectations"][1]["pairs"][0];
  EXPECT_EQ(pair["comparison"]["first_divergence"]["name"], "embedding.word_embeddings.weight");
  EXPECT_EQ(pair["owners"]["embedding.word_embeddings.weight"]["pipeline_rank"], 0);
  EXPECT_EQ(j["variants"][0]["losses"].size(), 2u);
}

TEST(CheckOutputTest, BadInputStillWritesAJUnitErrorCase) {
  ScratchDir dir;
  const std::string bad = dir.file("bad.toml");
  std::ofstream(bad) << "[scenario]\nname = \"x\"\n[model]\nhidden_size = -3\n";
  const auto r = run("check " + bad + " --junit " + dir.file("j.xml"));
  EXPECT_EQ(r.code, 2) << r.out;
  const std::string x = read_text(dir.file("j.xml"));
  EXPECT_THAT(x, HasSubstr("errors=\"1\""));
  EXPECT_THAT(x, HasSubstr("<error message=\"" + bad + ":4:15:"));
}

TEST(CheckOutputTest, EveryCheckGetsItsOwnRunDirectoryAndScenariosNeverMix) {
  ScratchDir dir;
  const std::string sc = tiny_scenario(dir);
  ASSERT_EQ(run("check " + sc + " --variant ref_p2 --variant cand_p2", dir.path()).code, 0);
  ASSERT_EQ(run("check " + sc + " --variant ref_p2 --variant cand_p2", dir.path()).code, 0);
  std::vector<std::string> runs;
  for (const auto& e : fs::directory_iterator(dir.file("runs/tiny"))) {
    if (!e.is_symlink()) runs.push_back(e.path().filename().string());
  }
  std::sort(runs.begin(), runs.end());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(std::regex_match(runs[0], std::regex("[0-9]{8}T[0-9]{6}Z(-[0-9]+)?")));
  EXPECT_EQ(fs::read_symlink(dir.file("runs/tiny/latest")).string(), runs[1]);
  EXPECT_TRUE(fs::exists(dir.file("runs/tiny/latest/ref_p2.h5")));
  // The records embed the scenario text; another scenario's records refuse to share --out.
  const std::string out = dir.file("runs/tiny/latest");
  EXPECT_THAT(run("info " + out + "/ref_p2.h5").out, HasSubstr("seed = 1234"));
  const std::string other = tiny_scenario(dir, 99);
  const auto mixed = run("check " + other + " --variant ref_p2 --variant cand_p2 --out " + out);
  EXPECT_EQ(mixed.code, 2) << mixed.out;
  EXPECT_THAT(mixed.out, HasSubstr("it was made from another scenario text (scenario \"tiny\")"));
  EXPECT_THAT(mixed.out, HasSubstr("records of different scenarios never share a run directory"));
  // No progress line when stderr is not a terminal.
  EXPECT_THAT(run("check " + other + " --variant ref_p2 --variant cand_p2", dir.path()).out,
              Not(HasSubstr("ETA")));
}

TEST(InfoTest, PrintsEveryStepsLosses) {
  ScratchDir dir;
  const auto r = run("check " + tiny_scenario(dir) + " --variant ref_p2 --variant cand_p2 --out " +
                     dir.path());
  ASSERT_EQ(r.code, 0) << r.out;
  const auto info = run("info " + dir.file("ref_p2.h5"));
  EXPECT_EQ(info.code, 0);
  EXPECT_THAT(info.out, HasSubstr("losses:\n# step  lm  mtp_1  total\n"));
  // Every step's groups with their tensor counts (lm, mtp_1 and total losses; full records).
  EXPECT_TRUE(std::regex_search(info.out, std::regex("\n  step 0: weight [0-9]+\n"))) << info.out;
  EXPECT_TRUE(std::regex_search(
      info.out, std::regex("\n  step 2: batch 3, loss 3, grad ([0-9]+), weight \\1\n")))
      << info.out;
  const auto dig = run("run " + tiny_scenario(dir) + " --variant ref_p1 --record digest --out " +
                       dir.file("d.h5"));
  ASSERT_EQ(dig.code, 0) << dig.out;
  EXPECT_TRUE(std::regex_search(run("info " + dir.file("d.h5")).out,
                                std::regex("\n  step 1: batch 3, loss 3, grad ([0-9]+) \\(\\1 "
                                           "digest-only\\), weight \\1 \\(\\1 digest-only\\)\n")));
  EXPECT_TRUE(std::regex_search(info.out, std::regex("\n     1  [0-9.]+  [0-9.]+  [0-9.]+\n"
                                                     "     2  [0-9.]+  [0-9.]+  [0-9.]+\n")))
      << info.out;
  EXPECT_THAT(info.out, HasSubstr("schema_version = 2"));
  EXPECT_THAT(info.out, HasSubstr("blas_core = "));
  EXPECT_THAT(info.out, HasSubstr("aten_cpu_capability = "));
  // The losses come first, before the attributes.
  EXPECT_LT(info.out.find("losses:"), info.out.find("schema_version = 2"));
  // --json: the same facts as one object.
  const auto js = run("info " + dir.file("ref_p2.h5") + " --json");
  ASSERT_EQ(js.code, 0) << js.out;
  const auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["attributes"]["seed"], 1234);
  EXPECT_EQ(j["losses"].size(), 2u);
  EXPECT_EQ(j["steps"][2]["groups"]["loss"]["tensors"], 3);
  EXPECT_TRUE(j["first_nonfinite"].is_null());
}

TEST(DigestRecordTest, DigestRecordsAreSmallAndLocalizeNamesTheElement) {
  ScratchDir dir;
  const std::string sc = tiny_scenario(dir);
  const auto r = run("check " + sc + " --record digest --out " + dir.path());
  EXPECT_EQ(r.code, 1) << r.out;  // p1_fails fails, on digests alone
  EXPECT_THAT(r.out, HasSubstr("digests differ in"));
  const auto full = run("check " + sc + " --record full --variant ref_p2 --variant cand_p2 --out " +
                        dir.file("full"));
  ASSERT_EQ(full.code, 0) << full.out;
  EXPECT_LT(fs::file_size(dir.file("ref_p2.h5")), fs::file_size(dir.file("full/ref_p2.h5")));
  // Digest-only against full: equal by digests.
  const auto same = run("compare " + dir.file("ref_p2.h5") + " " + dir.file("full/ref_p2.h5"));
  EXPECT_EQ(same.code, 0) << same.out;
  EXPECT_THAT(same.out, HasSubstr("decided by digests alone"));
  const std::string pair = dir.file("ref_p2.h5") + " " + dir.file("ref_p1.h5") + " --records grad";
  const auto blocks = run("compare " + pair);
  EXPECT_EQ(blocks.code, 1);
  EXPECT_TRUE(
      std::regex_search(blocks.out, std::regex("first divergence: step [12] grad/embedding\\."
                                               "word_embeddings\\.weight: digests differ in 1 of 1 "
                                               "blocks")))
      << blocks.out;
  const auto loc = run("compare " + pair + " --localize --json " + dir.file("loc.json"));
  EXPECT_EQ(loc.code, 1) << loc.out;
  EXPECT_THAT(loc.out, HasSubstr("the re-run of A reproduces"));
  EXPECT_THAT(loc.out, HasSubstr("the re-run of B reproduces"));
  EXPECT_TRUE(std::regex_search(
      loc.out, std::regex("first divergence: step [12] grad/embedding\\.word_embeddings\\.weight"
                          "\\[[0-9]+, [0-9]+\\]: a=\\S+ \\(0x[0-9a-f]{8}\\) b=\\S+ "
                          "\\(0x[0-9a-f]{8}\\)")))
      << loc.out;
  const auto j = nlohmann::json::parse(read_text(dir.file("loc.json")));
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_GE(j["first_divergence"]["digest"]["first_block"], 0);
  EXPECT_EQ(j["localized"]["first_divergence"]["name"], "embedding.word_embeddings.weight");
  EXPECT_EQ(j["localized"]["first_divergence"]["first"]["coord"].size(), 2u);
}

TEST(GoldenCliTest, NamesTheChangedTensorAndRefusesAnotherEnvironment) {
  ScratchDir dir;
  const std::string sc = tiny_scenario(dir);
  const std::string g = " --golden-dir " + dir.file("g");
  const auto missing = run("golden check " + sc + g);
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.out, HasSubstr("no goldens for scenario \"tiny\""));
  const auto made = run("golden update " + sc + g);
  ASSERT_EQ(made.code, 0) << made.out;
  EXPECT_THAT(made.out, HasSubstr("golden update tiny: new goldens of"));
  const auto again = run("golden update " + sc + g);
  EXPECT_THAT(again.out, HasSubstr("golden update tiny: unchanged"));
  EXPECT_EQ(run("golden check " + sc + g).code, 0);
  // Spoil one digest: the check names the variant, step and tensor.
  const std::string file = dir.file("g/tiny.txt");
  std::string text = read_text(file);
  const std::string row = "digests cand_p2 2 grad ";
  const size_t at = text.find(row);
  ASSERT_NE(at, std::string::npos);
  text[at + row.size()] = text[at + row.size()] == '0' ? '1' : '0';
  std::ofstream(file) << text;
  const auto changed = run("golden check " + sc + g);
  EXPECT_EQ(changed.code, 1) << changed.out;
  EXPECT_THAT(changed.out, HasSubstr("golden check tiny: DIFFERENT: 1 of"));
  EXPECT_THAT(changed.out, HasSubstr("first: variant cand_p2 step 2 grad/embedding.word_embeddings"
                                     ".weight"));
  // Goldens of another BLAS: refused, unless asked.
  text = std::regex_replace(read_text(file), std::regex("\nfingerprint blas [^\n]*"),
                            "\nfingerprint blas reference BLAS");
  std::ofstream(file) << text;
  const auto refused = run("golden check " + sc + g);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("refusing to compare scenario \"tiny\""));
  EXPECT_THAT(refused.out, HasSubstr("blas: \"reference BLAS\" (goldens)"));
  EXPECT_EQ(run("golden check " + sc + g + " --allow-fingerprint-mismatch").code, 1);
  const auto update = run("golden update " + sc + g);
  EXPECT_THAT(update.out, HasSubstr("1 of"));
  EXPECT_THAT(update.out, HasSubstr("environment: blas"));
}

// A golden mismatch says first what changed in the scenario text (as a diff), then sums the
// changed tensors up by variant × step × group with the losses' values; --detail lists every
// tensor. Updating goldens of another scenario text needs --accept-scenario-change, and
// --dry-run writes nothing.
TEST(GoldenCliTest, AMismatchIsSummedUpAndAScenarioChangeNeedsConsent) {
  ScratchDir dir;
  const std::string g = " --golden-dir " + dir.file("g");
  const auto made = run("golden update " + tiny_scenario(dir) + g);
  ASSERT_EQ(made.code, 0) << made.out;
  const std::string golden_text = read_text(dir.file("g/tiny.txt"));
  EXPECT_THAT(golden_text, HasSubstr("\n| seed = 1234\n"));
  EXPECT_THAT(golden_text, HasSubstr("\nlosses ref_p2 1 lm="));
  const std::string sc = tiny_scenario(dir, 1235);
  const auto changed = run("golden check " + sc + g);
  EXPECT_EQ(changed.code, 1) << changed.out;
  EXPECT_THAT(changed.out, HasSubstr("  the scenario text changed since the goldens were made:\n"
                                     "    - seed = 1234\n    + seed = 1235\n"));
  EXPECT_THAT(changed.out, HasSubstr("    ref_p2 step 1 loss: 3 of 3, first lm\n      lm "));
  EXPECT_THAT(changed.out, HasSubstr(" relative)\n"));
  EXPECT_THAT(changed.out, HasSubstr("(--detail lists all "));
  EXPECT_LT(count(changed.out, "\n"), 60) << "a summary, not every tensor";
  const auto detail = run("golden check " + sc + g + " --detail");
  EXPECT_GT(count(detail.out, "\n    variant ref_p2 step 1 grad/"), 3) << detail.out;
  // Another scenario text is another test: no silent update.
  const auto refused = run("golden update " + sc + g);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("pass --accept-scenario-change"));
  const auto dry = run("golden update " + sc + g + " --accept-scenario-change --dry-run");
  EXPECT_EQ(dry.code, 0) << dry.out;
  EXPECT_THAT(dry.out, HasSubstr("would be written to"));
  EXPECT_EQ(read_text(dir.file("g/tiny.txt")), golden_text) << "--dry-run wrote the goldens";
  EXPECT_EQ(run("golden update " + sc + g + " --accept-scenario-change").code, 0);
  EXPECT_THAT(read_text(dir.file("g/tiny.txt")), HasSubstr("\n| seed = 1235\n"));
  // --records without a scenario file: the scenario is the one the records were made from.
  ASSERT_EQ(run("check " + sc + " --quiet --out " + dir.file("r")).code, 1);  // p1_fails
  const auto from_records = run("golden check --records " + dir.file("r") + g);
  EXPECT_EQ(from_records.code, 0) << from_records.out;
  EXPECT_THAT(from_records.out, HasSubstr("golden check tiny: EQUAL"));
}

// check --keep-last N keeps runs/<scenario>/ from growing: the N newest run directories stay.
TEST(CheckOutputTest, KeepLastPrunesTheOldestRunDirectories) {
  ScratchDir dir;
  const std::string sc = tiny_scenario(dir);
  const std::string args = "check " + sc + " --quiet --variant ref_p2 --variant cand_p2 ";
  // Names that only look like run directories are left alone (a suffix stoi cannot hold was an
  // exit 3 once).
  for (const char* odd : {"20200101T000000Z-T", "20200101T000000Z-99999999999"}) {
    std::filesystem::create_directories(dir.file(std::string("runs/tiny/") + odd));
  }
  for (int i = 0; i < 3; ++i) ASSERT_EQ(run(args + "--keep-last 2", dir.path()).code, 0);
  for (const char* odd : {"20200101T000000Z-T", "20200101T000000Z-99999999999"}) {
    EXPECT_TRUE(std::filesystem::exists(dir.file(std::string("runs/tiny/") + odd))) << odd;
    std::filesystem::remove(dir.file(std::string("runs/tiny/") + odd));
  }
  std::vector<std::string> runs;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("runs/tiny"))) {
    runs.push_back(e.path().filename().string());
  }
  std::sort(runs.begin(), runs.end());
  ASSERT_EQ(runs.size(), 3u) << "two run directories and latest";
  EXPECT_EQ(runs[2], "latest");
  EXPECT_TRUE(std::filesystem::exists(dir.file("runs/tiny/latest/ref_p2.h5")));
  const auto out = run(args + "--keep-last 1", dir.path());
  EXPECT_THAT(out.out, HasSubstr("# --keep-last 1: removed the 2 oldest run directories of "
                                 "runs/tiny/"));
  EXPECT_EQ(run(args + "--keep-last 1 --out " + dir.file("o"), dir.path()).code, 2);
}

// A run that turns NaN (lr 1e38: step 1 moves every weight by about 1e38, step 2 overflows):
// compare never calls its records equal, and goldens are not made or checked from them.
TEST(NonFiniteCliTest, RecordsHoldingNaNFailCompareAndGoldens) {
  ScratchDir dir;
  std::string text = read_text(tiny_scenario(dir));
  text.replace(text.find("seed = 1234"), 11, "seed = 1234\nlr = 1e38");
  std::ofstream(dir.file("nan.toml")) << text;
  const auto made = run("check " + dir.file("nan.toml") + " --quiet --out " + dir.file("r"));
  EXPECT_EQ(made.code, 1) << made.out;
  EXPECT_THAT(made.out, HasSubstr("non-finite value in ref_p2: step 2 loss/"));
  const std::string rec = dir.file("r/ref_p2.h5");
  const auto same = run("compare " + rec + " " + rec);
  EXPECT_EQ(same.code, 1) << same.out;
  EXPECT_THAT(same.out,
              HasSubstr("# verdict: NOT FINITE (bitwise): non-finite value in A: step 2"));
  EXPECT_EQ(run("compare " + rec + " " + rec + " --allow-nonfinite").code, 0);
  EXPECT_THAT(run("info " + rec).out, HasSubstr("first non-finite value: step 2 loss/"));
  const auto gold =
      run("golden update --records " + dir.file("r") + " --golden-dir " + dir.file("g"));
  EXPECT_EQ(gold.code, 2) << gold.out;
  EXPECT_THAT(gold.out, HasSubstr("goldens are made and checked only from finite runs"));
}

TEST(GoldenCliTest, RecordsOfAnotherScenarioTextAreRefused) {
  // golden check --records compares only records made from the scenario's own text; `run`
  // records carry that text too.
  ScratchDir dir;
  const std::string sc = tiny_scenario(dir);
  const auto made = run("check " + sc + " --out " + dir.file("r") + " --quiet");
  ASSERT_EQ(made.code, 1) << made.out;  // the tiny scenario's p1_fails fails by design
  const auto one = run("run " + sc + " --variant ref_p1 --out " + dir.file("one.h5"));
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_THAT(run("info " + dir.file("one.h5")).out, HasSubstr("name = \"tiny\""));
  std::ofstream(sc, std::ios::app) << "# the text changed\n";
  const auto other =
      run("golden update " + sc + " --records " + dir.file("r") + " --golden-dir " + dir.file("g"));
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_THAT(other.out, HasSubstr("it was made from another scenario text"));
}

TEST(EquivTest, SaysEqualOrNamesTheFirstDivergence) {
  ScratchDir dir;
  const auto eq = run("equiv 'E|t*3|(t|)*5mmL' 'E|t*3|(t|)*4tmm|L' --pp 4 --steps 1 --json " +
                      dir.file("e.json"));
  EXPECT_EQ(eq.code, 0) << eq.out;
  EXPECT_THAT(eq.out, HasSubstr("# A: reference E|t*3|(t|)*5mmL (P 4, V 2"));
  EXPECT_THAT(eq.out, HasSubstr("# B: candidate E|t*3|(t|)*4tmm|L (P 4, V 2"));
  EXPECT_THAT(eq.out, HasSubstr("EQUAL (bitwise)"));
  const auto ej = nlohmann::json::parse(read_text(dir.file("e.json")));
  EXPECT_EQ(ej["equal"], true);
  EXPECT_EQ(ej["dp"], 1);
  EXPECT_EQ(ej["cp"], 1);
  EXPECT_EQ(ej["ep"], 1);
  EXPECT_EQ(ej["dtype"], "float32");
  EXPECT_EQ(ej["a"]["schedule"], "interleaved");
  EXPECT_EQ(ej["b"]["schedule"], "interleaved");
  const auto diff = run("equiv 'Et*8mmL' 'E|t*3|(t|)*5mmL' --pp 1 --pp-b 4 --steps 1");
  EXPECT_EQ(diff.code, 1) << diff.out;
  EXPECT_THAT(diff.out, HasSubstr("first divergence: step 1 grad/embedding.word_embeddings."
                                  "weight["));
  EXPECT_THAT(diff.out, HasSubstr("is owned by stage 0 (pipeline rank 0, virtual stage 0) in A"));
  const auto bad = run("equiv 'E|tt|L' 'E|t*3|(t|)*5mmL' --pp 2");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("layout A \"E|tt|L\" (P = 2, --model default: 8 decoder layers, "
                                 "2 MTP depths)"));
  EXPECT_EQ(run("equiv a b --pp 1 --model nope").code, 2);
}

}  // namespace
