#include "harness/golden/golden.h"

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "harness/common/environment.h"
#include "harness/common/error.h"
#include "harness/common/test_util.h"
#include "harness/record/record.h"

namespace mtp::golden {
namespace {

using record::TensorData;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::ScratchDir;

/// A record of steps 0–1: weights w1, w2 (and `extra` at step 1 when given), a loss, with the
/// environment attributes of this machine (and blas overridden when `blas` is not empty).
void write(const std::string& path, float w2, const std::string& blas = "", bool extra = false) {
  record::RecordWriter w(path);
  for (const auto& [k, v] : environment_fingerprint()) w.set_attr(k, v);
  w.set_attr("torch_version", std::string("1.13.1"));
  if (!blas.empty()) w.set_attr("blas", blas);
  w.write(0, "weight", TensorData::from_f32("w1", {2}, {1.0f, 2.0f}));
  w.write(0, "weight", TensorData::from_f32("w2", {1}, {w2}));
  w.write(1, "loss", TensorData::from_f32("lm", {}, {3.0f}));
  w.write(1, "loss", TensorData::from_f32("total", {}, {3.0f}));
  w.write(1, "weight", TensorData::from_f32("w1", {2}, {1.5f, 2.5f}));
  w.write(1, "weight", TensorData::from_f32("w2", {1}, {w2 + 1}));
  if (extra) w.write(1, "weight", TensorData::from_f32("w3", {1}, {7.0f}));
  w.commit();
}

std::string hex16(const std::vector<float>& v) {
  return record::digest_bytes(v.data(), v.size() * 4, 4).whole.hex().substr(0, 16);
}

TEST(GoldenTest, DigestsEveryTensorOfEveryStepAndVariant) {
  ScratchDir dir;
  write(dir.file("a.h5"), 0.5f);
  write(dir.file("b.h5"), 0.5f, "", /*extra=*/true);
  const GoldenFile g = golden_from_records("s", std::string(32, 'a'),
                                           {{"va", dir.file("a.h5")}, {"vb", dir.file("b.h5")}});
  EXPECT_EQ(g.names.size(), 2u);
  EXPECT_THAT(g.names_of("loss"), ElementsAre("lm", "total"));
  EXPECT_THAT(g.names_of("weight"), ElementsAre("w1", "w2", "w3"));
  // va: step 0 weight, step 1 loss, step 1 weight; vb likewise.
  ASSERT_EQ(g.rows.size(), 6u);
  EXPECT_EQ(g.digest("va", 1, "weight", "w1"), hex16({1.5f, 2.5f}));
  EXPECT_EQ(g.digest("va", 0, "weight", "w2"), hex16({0.5f}));
  EXPECT_EQ(g.digest("va", 1, "weight", "w3"), "");  // absent in va
  EXPECT_EQ(g.digest("vb", 1, "weight", "w3"), hex16({7.0f}));
  EXPECT_EQ(g.fingerprint.at("torch_version"), "1.13.1");
  EXPECT_EQ(g.fingerprint.at("cpu_fma"), environment_fingerprint().at("cpu_fma"));
}

TEST(GoldenTest, FormatAndParseRoundTrip) {
  ScratchDir dir;
  write(dir.file("a.h5"), 0.5f, "", true);
  const GoldenFile g = golden_from_records("s", std::string(32, 'b'), {{"va", dir.file("a.h5")}});
  const std::string text = format_golden(g);
  EXPECT_THAT(text, HasSubstr("\nnames weight 3\n  w1\n  w2\n  w3\n"));
  EXPECT_THAT(text, HasSubstr("\ndigests va 0 weight " + hex16({1.0f, 2.0f}) + " " + hex16({0.5f}) +
                              " -\n"));
  const GoldenFile back = parse_golden(text, "x.txt");
  EXPECT_EQ(back.scenario, "s");
  EXPECT_EQ(back.fingerprint, g.fingerprint);
  EXPECT_EQ(format_golden(back), text);
  EXPECT_TRUE(diff_goldens(g, back).equal());
}

TEST(GoldenTest, DiffNamesEveryChangedAddedAndRemovedTensor) {
  ScratchDir dir;
  write(dir.file("a.h5"), 0.5f);
  write(dir.file("b.h5"), 0.75f, "", true);
  const GoldenFile golden = golden_from_records("s", "x", {{"v", dir.file("a.h5")}});
  const GoldenFile now = golden_from_records("s", "x", {{"v", dir.file("b.h5")}});
  const GoldenDiff d = diff_goldens(golden, now);
  EXPECT_FALSE(d.equal());
  EXPECT_EQ(d.tensors, 7);  // w1 w2 (step 0), lm total w1 w2 w3 (step 1)
  ASSERT_EQ(d.changes.size(), 3u);
  EXPECT_EQ(d.changes[0].describe(),
            "variant v step 0 weight/w2: golden " + hex16({0.5f}) + " now " + hex16({0.75f}));
  EXPECT_EQ(d.changes[1].name, "w2");
  EXPECT_EQ(d.changes[1].step, 1);
  EXPECT_EQ(d.changes[2].describe(),
            "variant v step 1 weight/w3: golden absent now " + hex16({7.0f}));
  EXPECT_TRUE(d.fingerprint_bits.empty());
}

// The goldens keep every step's losses as numbers and the scenario text, so a change shows its
// size and its cause; the changed tensors are summed up by variant × step × group.
TEST(GoldenTest, ADiffShowsTheScenarioTextChangeTheLossesAndASummary) {
  ScratchDir dir;
  write(dir.file("a.h5"), 0.5f);
  {
    record::RecordWriter w(dir.file("b.h5"));
    for (const auto& [k, v] : environment_fingerprint()) w.set_attr(k, v);
    w.set_attr("torch_version", std::string("1.13.1"));
    w.write(0, "weight", TensorData::from_f32("w1", {2}, {1.0f, 2.0f}));
    w.write(0, "weight", TensorData::from_f32("w2", {1}, {0.5f}));
    w.write(1, "loss", TensorData::from_f32("lm", {}, {3.25f}));
    w.write(1, "loss", TensorData::from_f32("total", {}, {3.0f}));
    w.write(1, "weight", TensorData::from_f32("w1", {2}, {1.5f, 2.0f}));
    w.write(1, "weight", TensorData::from_f32("w2", {1}, {0.0f}));
    w.commit();
  }
  const GoldenFile golden =
      golden_from_records("s", "[training]\nseed = 1234\nsteps = 1\n", {{"v", dir.file("a.h5")}});
  EXPECT_EQ(golden.losses.size(), 1u);
  EXPECT_THAT(format_golden(golden), HasSubstr("\nlosses v 1 lm=3 total=3\n"));
  EXPECT_THAT(format_golden(golden),
              HasSubstr("\nscenario_text 3\n| [training]\n| seed = 1234\n| steps = 1\n"));
  const GoldenFile now =
      golden_from_records("s", "[training]\nseed = 1235\nsteps = 1\n", {{"v", dir.file("b.h5")}});
  const GoldenDiff d = diff_goldens(parse_golden(format_golden(golden), "g.txt"), now);
  EXPECT_TRUE(d.scenario_changed);
  EXPECT_THAT(d.scenario_text_diff, ElementsAre("- seed = 1234", "+ seed = 1235"));
  ASSERT_EQ(d.loss_changes.size(), 1u);
  EXPECT_EQ(d.loss_changes[0].describe(), "lm 3 → 3.25 (Δ +0.25, 0.0833 relative)");
  ASSERT_EQ(d.changed_groups.size(), 2u);
  EXPECT_EQ(d.changed_groups[0].group, "loss");
  EXPECT_EQ(d.changed_groups[0].changed, 1);
  EXPECT_EQ(d.changed_groups[1].step, 1);
  EXPECT_EQ(d.changed_groups[1].group, "weight");
  EXPECT_EQ(d.changed_groups[1].changed, 2);
  EXPECT_EQ(d.changed_groups[1].total, 2);
  EXPECT_EQ(d.changed_groups[1].first, "w1");
}

TEST(GoldenTest, LineDiffIsAShortestEditScript) {
  EXPECT_THAT(line_diff("a\nb\nc\nd\n", "a\nc\nd\ne\n"), ElementsAre("- b", "+ e"));
  EXPECT_THAT(line_diff("x\n", "x\n"), ElementsAre());
  EXPECT_THAT(line_diff("", "y"), ElementsAre("+ y"));
}

TEST(GoldenTest, FingerprintDifferencesThatChangeBitsAreSeparated) {
  ScratchDir dir;
  write(dir.file("a.h5"), 0.5f, "reference BLAS");
  write(dir.file("b.h5"), 0.5f, "OpenBLAS 0.3.21");
  GoldenFile golden = golden_from_records("s", "x", {{"v", dir.file("a.h5")}});
  const GoldenFile now = golden_from_records("s", "x", {{"v", dir.file("b.h5")}});
  golden.fingerprint["cpu_model"] = "another CPU";
  const GoldenDiff d = diff_goldens(golden, now);
  EXPECT_TRUE(d.equal());
  EXPECT_THAT(d.fingerprint_bits,
              ElementsAre("blas: \"reference BLAS\" (goldens) vs \"OpenBLAS 0.3.21\" (now)"));
  ASSERT_EQ(d.fingerprint_info.size(), 1u);
  EXPECT_THAT(d.fingerprint_info[0], HasSubstr("cpu_model: \"another CPU\" (goldens)"));
}

TEST(GoldenTest, RecordsOfOneScenarioMustShareTheirEnvironment) {
  ScratchDir dir;
  write(dir.file("a.h5"), 0.5f, "reference BLAS");
  write(dir.file("b.h5"), 0.5f, "OpenBLAS");
  EXPECT_THROW(golden_from_records("s", "x", {{"a", dir.file("a.h5")}, {"b", dir.file("b.h5")}}),
               InputError);
}

TEST(GoldenTest, MalformedFilesNameTheLineAndTheRule) {
  auto expect_error = [](const std::string& text, const std::string& part) {
    try {
      parse_golden(text, "g.txt");
      ADD_FAILURE() << "parsed: " << text;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(part)) << text;
    }
  };
  const std::string head = "mtp-harness-goldens 1\nscenario s\n";
  expect_error("", "g.txt:0: empty file");
  expect_error("hello\n", "g.txt:1: not a goldens file");
  expect_error(head + "names weight 2\n  w1\n", "g.txt:4: the file ends after 1 of 2 names");
  expect_error(head + "names weight 1\nw1\n", "g.txt:4: expected a tensor name");
  expect_error(head + "digests v 1 grad 0123456789abcdef\n",
               "g.txt:3: digests of group grad "
               "before its names");
  expect_error(head + "names grad 1\n  g\ndigests v 1 grad 0123\n",
               "g.txt:5: digest \"0123\" is not 16 lower-case hex digits");
  expect_error(head + "names grad 1\n  g\ndigests v 1 grad - -\n",
               "g.txt:5: 2 digests for the 1 names of group grad");
  expect_error(head + "bogus 1\n", "g.txt:3: unknown line kind \"bogus\"");
  // A row given twice would let its first, wrong copy pass unseen.
  expect_error(head + "names grad 1\n  g\ndigests v 1 grad -\ndigests v 1 grad -\n",
               "g.txt:6: digests of variant v step 1 group grad given twice");
  const std::string head2 = "mtp-harness-goldens 2\nscenario s\n";
  expect_error(head2 + "losses v 1 lm=2 total=2\nlosses v 1 lm=2 total=2\n",
               "g.txt:4: losses of variant v step 1 given twice (first on line 3)");
  expect_error(head2 + "losses v 1 lm=two\n", "g.txt:3: loss \"lm=two\" is not <name>=<number>");
  // A row cut short (the file truncated mid-line) or edited: lm, mtp_1 .. mtp_D and total.
  expect_error(head2 + "losses v 1 lm=2 mtp_1=2\n",
               "g.txt:3: the losses of variant v step 1 are {lm, mtp_1}: a row holds lm, mtp_1 .. "
               "mtp_D and total (a truncated or edited line?)");
  expect_error(head2 + "losses v 1 lm=2 mtp_2=1 total=2\n", "are {lm, mtp_2, total}");
  expect_error(head2 + "losses v 1\n", "the losses of variant v step 1 are {}");
  // A complete row passes: the file fails only later, for its missing scenario text.
  expect_error(head2 + "losses v 1 lm=2 mtp_1=1 mtp_2=1 total=2\n",
               "g.txt:3: no \"scenario_xxh3_128\" line");
  expect_error(head2 + "scenario_text 2\n| a\n", "ends with 1 scenario text lines to read");
  expect_error(head2 + "scenario_text 1\nx\n", "g.txt:4: expected a scenario text line");
  expect_error("mtp-harness-goldens 1\n", "no \"scenario\" line");
  expect_error(head + "fingerprint\n", "g.txt:3: fingerprint needs a key");
  EXPECT_THROW(read_golden_file("/nonexistent/goldens.txt"), InputError);
}

/// The error of parsing `text` as g.txt, "(parsed)" when it parses.
std::string golden_error(const std::string& text) {
  try {
    parse_golden(text, "g.txt");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(parsed)";
}

/// `text` with its first `from` replaced by `to`.
std::string edited(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Issue 19 defect 11: a duplicated entry whose first copy is wrong gave EQUAL (the later copy
// won): a tensor listed twice in its group's names (its first digest column never compared), a
// fingerprint key, the scenario digest. Every key may now be given once; a second copy names the
// line of the first.
TEST(GoldenTest, EveryKeyIsGivenOnceAndASecondCopyNamesBothLines) {
  ScratchDir dir;
  write(dir.file("a.h5"), 0.5f);
  const GoldenFile g = golden_from_records("s", "x = 1\n", {{"v", dir.file("a.h5")}});
  const std::string text = format_golden(g);
  ASSERT_EQ(golden_error(text), "(parsed)");
  // w2 listed twice; its first column holds a wrong digest that the old parser never compared.
  const std::string w2_0 = hex16({0.5f}), w2_1 = hex16({1.5f});
  std::string dup =
      edited(text, "names weight 2\n  w1\n  w2\n", "names weight 3\n  w1\n  w2\n  w2\n");
  dup = edited(dup, "digests v 0 weight " + hex16({1.0f, 2.0f}) + " " + w2_0,
               "digests v 0 weight " + hex16({1.0f, 2.0f}) + " 0123456789abcdef " + w2_0);
  dup = edited(dup, "digests v 1 weight " + hex16({1.5f, 2.5f}) + " " + w2_1,
               "digests v 1 weight " + hex16({1.5f, 2.5f}) + " 0123456789abcdef " + w2_1);
  const int names_line =
      static_cast<int>(std::count(
          text.begin(), text.begin() + static_cast<long>(text.find("names weight")), '\n')) +
      1;
  EXPECT_EQ(golden_error(dup), fmt::format("g.txt:{}: tensor \"w2\" of group weight given twice "
                                           "(first on line {})",
                                           names_line + 3, names_line + 2));
  const std::string blas = "\nfingerprint blas ";
  const size_t at = text.find(blas);
  ASSERT_NE(at, std::string::npos);
  EXPECT_THAT(golden_error(text.substr(0, at) + blas + "wrong" + text.substr(at)),
              HasSubstr("fingerprint blas given twice (first on line"));
  EXPECT_THAT(golden_error(edited(text, "scenario s\n", "scenario s\nscenario s\n")),
              HasSubstr("g.txt:7: scenario given twice (first on line 6)"));
  EXPECT_THAT(golden_error(edited(text, "losses v 1 lm=3", "losses v 1 lm=4 lm=3")),
              HasSubstr("loss lm given twice in the line"));
}

// Issue 19 defect 11: the file's scenario line was never checked against the scenario checked.
TEST(GoldenTest, TheFilesScenarioMustBeTheScenarioChecked) {
  ScratchDir dir;
  write(dir.file("a.h5"), 0.5f);
  const GoldenFile g = golden_from_records("s", "x = 1\n", {{"v", dir.file("a.h5")}});
  std::ofstream(dir.file("s.txt")) << format_golden(g);
  EXPECT_EQ(read_golden_file(dir.file("s.txt"), "s").scenario_line, 6);
  try {
    read_golden_file(dir.file("s.txt"), "other");
    ADD_FAILURE() << "goldens of another scenario accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), dir.file("s.txt") +
                                         ":6: the goldens are of scenario \"s\", "
                                         "not of scenario \"other\" that is being checked");
  }
  const GoldenFile other = golden_from_records("other", "x = 1\n", {{"v", dir.file("a.h5")}});
  EXPECT_THROW(diff_goldens(read_golden_file(dir.file("s.txt")), other), InputError);
}

// Issue 19, golden parser gaps: non-finite losses, words after the counts, CRLF line ends, lines
// of format 2 after a format-1 header, and a scenario text that is not the one its digest names.
TEST(GoldenTest, NonFiniteLossesJunkCrlfMixedFormatsAndAnEditedTextAreRefused) {
  ScratchDir dir;
  write(dir.file("a.h5"), 0.5f);
  const std::string text =
      format_golden(golden_from_records("s", "x = 1\ny = 2\n", {{"v", dir.file("a.h5")}}));
  ASSERT_EQ(golden_error(text), "(parsed)");
  EXPECT_THAT(golden_error(edited(text, "lm=3", "lm=nan")),
              HasSubstr("loss \"lm=nan\" is not finite: goldens are made only from finite runs"));
  EXPECT_THAT(golden_error(edited(text, "lm=3", "lm=-inf")),
              HasSubstr("\"lm=-inf\" is not finite"));
  EXPECT_THAT(golden_error(edited(text, "lm=3", "lm=3x")), HasSubstr("\"lm=3x\" is not <name>="));
  EXPECT_EQ(golden_error(edited(text, "scenario s\n", "scenario s junk\n")),
            "g.txt:6: expected \"scenario <name>\", then nothing (\"junk\" follows)");
  EXPECT_THAT(golden_error(edited(text, "names weight 2\n", "names weight 2 3\n")),
              HasSubstr("expected \"names <group> <count>\", then nothing (\"3\" follows)"));
  EXPECT_THAT(golden_error(edited(text, "names weight 2\n", "names weight 2x\n")),
              HasSubstr("expected \"names <group> <count>\" (a count of at most 10000000)"));
  EXPECT_THAT(golden_error(edited(text, "scenario_text 2\n", "scenario_text 2 #\n")),
              HasSubstr("g.txt:8: expected \"scenario_text <line count>\", then nothing"));
  EXPECT_THAT(golden_error(edited(text, "names weight 2\n", "names wieght 2\n")),
              HasSubstr("names of group \"wieght\", which is not a record group"));
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_EQ(golden_error(crlf),
            "g.txt:1: a carriage return (\\r) at column 22 (CRLF line "
            "ends?): goldens are text with \\n line ends, as `mtp-harness "
            "golden update` writes them");
  EXPECT_THAT(golden_error(edited(text, "scenario s\n", "scenario s\r\n")),
              HasSubstr("g.txt:6: a carriage return (\\r) at column 11 (CRLF line ends?)"));
  // A scenario written with CRLF line ends keeps them in its text: the goldens still read.
  const std::string crlf_text =
      format_golden(golden_from_records("s", "x = 1\r\ny = 2\r\n", {{"v", dir.file("a.h5")}}));
  EXPECT_EQ(parse_golden(crlf_text, "g.txt").scenario_text, "x = 1\r\ny = 2\r\n");
  const std::string v1 = edited(text, "mtp-harness-goldens 2\n", "mtp-harness-goldens 1\n");
  EXPECT_EQ(golden_error(v1),
            "g.txt:8: \"scenario_text\" lines are of format 2, but the file's "
            "first line says format 1 (\"mtp-harness-goldens 1\")");
  EXPECT_THAT(golden_error(edited(text, "| y = 2\n", "| y = 3\n")),
              HasSubstr("g.txt:8: the scenario text (this line and the next 2) has digest "));
  EXPECT_THAT(
      golden_error(edited(text, "| y = 2\n", "| y = 3\n")),
      HasSubstr("but scenario_xxh3_128 (line 7) says " + scenario_text_digest("x = 1\ny = 2\n") +
                ": the text or the digest was edited"));
  EXPECT_THAT(golden_error(edited(text, "scenario_text 2\n| x = 1\n| y = 2\n", "")),
              HasSubstr("no \"scenario_text\" line (format 2 files have the scenario text"));
  // A text without a final newline reads back as itself (format_golden adds one).
  const std::string bare =
      format_golden(golden_from_records("s", "x = 1", {{"v", dir.file("a.h5")}}));
  EXPECT_EQ(parse_golden(bare, "g.txt").scenario_text, "x = 1");
}

// Every committed golden file parses under these rules (tests run from the repository root).
TEST(GoldenTest, TheCommittedGoldensParse) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator("golden/digests")) {
    if (e.path().extension() != ".txt") continue;
    const GoldenFile g = read_golden_file(e.path().string(), e.path().stem().string());
    EXPECT_EQ(scenario_text_digest(g.scenario_text), g.scenario_digest) << e.path();
    ++files;
  }
  EXPECT_GE(files, 7);
}

}  // namespace
}  // namespace mtp::golden
