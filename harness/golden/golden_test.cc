#include "harness/golden/golden.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/common/environment.h"
#include "harness/common/error.h"
#include "harness/common/test_util.h"
#include "harness/record/record.h"

namespace mtp::golden {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using record::TensorData;
using testing_util::ScratchDir;

/// A record of steps 0–1: weights w1, w2 (and `extra` at step 1 when given), a loss, with the
/// environment attributes of this machine (and blas overridden when `blas` is not empty).
void write(const std::string& path, float w2, const std::string& blas = "",
           bool extra = false) {
  record::RecordWriter w(path);
  for (const auto& [k, v] : environment_fingerprint()) w.set_attr(k, v);
  w.set_attr("torch_version", std::string("1.13.1"));
  if (!blas.empty()) w.set_attr("blas", blas);
  w.write(0, "weight", TensorData::from_f32("w1", {2}, {1.0f, 2.0f}));
  w.write(0, "weight", TensorData::from_f32("w2", {1}, {w2}));
  w.write(1, "loss", TensorData::from_f32("lm", {}, {3.0f}));
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
  const GoldenFile g = golden_from_records(
      "s", std::string(32, 'a'), {{"va", dir.file("a.h5")}, {"vb", dir.file("b.h5")}});
  EXPECT_EQ(g.names.size(), 2u);
  EXPECT_THAT(g.names_of("loss"), ElementsAre("lm"));
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
  EXPECT_THAT(text, HasSubstr("\ndigests va 0 weight " + hex16({1.0f, 2.0f}) + " " +
                              hex16({0.5f}) + " -\n"));
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
  EXPECT_EQ(d.tensors, 6);  // w1 w2 (step 0), lm w1 w2 w3 (step 1)
  ASSERT_EQ(d.changes.size(), 3u);
  EXPECT_EQ(d.changes[0].describe(), "variant v step 0 weight/w2: golden " + hex16({0.5f}) +
                                         " now " + hex16({0.75f}));
  EXPECT_EQ(d.changes[1].name, "w2");
  EXPECT_EQ(d.changes[1].step, 1);
  EXPECT_EQ(d.changes[2].describe(), "variant v step 1 weight/w3: golden absent now " +
                                         hex16({7.0f}));
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
    w.write(1, "weight", TensorData::from_f32("w1", {2}, {1.5f, 2.0f}));
    w.write(1, "weight", TensorData::from_f32("w2", {1}, {0.0f}));
    w.commit();
  }
  const GoldenFile golden =
      golden_from_records("s", "[training]\nseed = 1234\nsteps = 1\n", {{"v", dir.file("a.h5")}});
  EXPECT_EQ(golden.losses.size(), 1u);
  EXPECT_THAT(format_golden(golden), HasSubstr("\nlosses v 1 lm=3\n"));
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
  expect_error(head + "digests v 1 grad 0123456789abcdef\n", "g.txt:3: digests of group grad "
                                                            "before its names");
  expect_error(head + "names grad 1\n  g\ndigests v 1 grad 0123\n",
               "g.txt:5: digest \"0123\" is not 16 lower-case hex digits");
  expect_error(head + "names grad 1\n  g\ndigests v 1 grad - -\n",
               "g.txt:5: 2 digests for the 1 names of group grad");
  expect_error(head + "bogus 1\n", "g.txt:3: unknown line kind \"bogus\"");
  // A row given twice would let its first, wrong copy pass unseen.
  expect_error(head + "names grad 1\n  g\ndigests v 1 grad -\ndigests v 1 grad -\n",
               "g.txt:6: digests of variant v step 1 group grad given twice");
  expect_error(head + "losses v 1 lm=2\nlosses v 1 lm=2\n",
               "g.txt:4: losses of variant v step 1 given twice");
  expect_error(head + "losses v 1 lm=two\n", "g.txt:3: loss \"lm=two\" is not <name>=<number>");
  expect_error(head + "scenario_text 2\n| a\n", "ends with 1 scenario text lines to read");
  expect_error(head + "scenario_text 1\nx\n", "g.txt:4: expected a scenario text line");
  expect_error("mtp-harness-goldens 1\n", "no \"scenario\" line");
  EXPECT_THROW(read_golden_file("/nonexistent/goldens.txt"), InputError);
}

}  // namespace
}  // namespace mtp::golden
