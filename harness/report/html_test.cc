// Tests of the HTML report (to_html, report.h) and its parts (markup.h, svg.h, heatmap.h): real
// counts of SVG elements on a hand-built scenario, escaping, and a headless-Chromium rendering.

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "harness/common/test_util.h"
#include "harness/report/heatmap.h"
#include "harness/report/markup.h"
#include "harness/report/report.h"
#include "harness/report/svg.h"

namespace mtp::report {
namespace {

/// A pair of runs `baseline` and `other` that does not hold (yet), compared in `seconds`.
PairResult pair(const std::string& baseline, const std::string& other, double seconds) {
  PairResult p;
  p.baseline = baseline;
  p.other = other;
  p.seconds = seconds;
  return p;
}

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kNan = std::numeric_limits<uint64_t>::max();

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

/// A compared tensor: `mismatches` elements differ in bits (and fail the class), by `ulp`.
compare::TensorDiff diff(int step, const std::string& group, const std::string& name,
                         uint64_t ulp = 0, int64_t mismatches = 0) {
  compare::TensorDiff d;
  d.step = step;
  d.group = group;
  d.name = name;
  d.numel = 64;
  d.mismatches = mismatches;
  d.bit_mismatches = mismatches;
  d.max_ulp = ulp;
  if (mismatches > 0) {
    d.first_index = 3;
    d.first_coord = {0, 3};
    d.a_value = "0.5";
    d.b_value = "0.50000006";
    d.a_bits = "0x3f000000";
    d.b_bits = "0x3f000001";
  }
  return d;
}

compare::TensorDiff digest_only(int step, const std::string& group, const std::string& name) {
  compare::TensorDiff d = diff(step, group, name);
  d.by_digest = true;
  d.blocks = 4;
  d.differing_blocks = 1;
  d.first_block = 2;
  d.first_block_coord = {2, 0};
  return d;
}

compare::TensorDiff structural(int step, const std::string& group, const std::string& name) {
  compare::TensorDiff d = diff(step, group, name);
  d.structural = "shape [8] vs [16]";
  return d;
}

const char* const kEmbedding = "embedding.word_embeddings.weight";
const char* const kMlp = "decoder.layers.0.mlp.weight";

/// Scenario, runs and results of a check: `equal` passes (3 variants), `dp` fails (serial vs
/// dp2, 6 tensors over steps 1..3, 4 of them differing), `gpu` is skipped.
struct Fixture {
  scenario::Scenario sc;
  std::vector<VariantRun> runs;
  std::vector<ExpectationResult> results;

  Fixture() {
    sc.name = "smoke <script>alert(1)</script>";
    sc.description = "P & V \"placements\" don't change bits";
    sc.source = "scenarios/a&b.toml";
    sc.expectations.resize(3);
    scenario::Expectation& equal = sc.expectations[0];
    equal.name = "pp_equals_serial";
    equal.variants = {"serial", "pp2", "pp4"};
    equal.why = "the schedule must not change a bit";
    scenario::Expectation& dp = sc.expectations[1];
    dp.name = "dp_equals_serial";
    dp.variants = {"serial", "dp2"};
    dp.why = "all-reduce <in order> & fixed";
    scenario::Expectation& gpu = sc.expectations[2];
    gpu.name = "gpu_equals_cpu";
    gpu.variants = {"serial", "gpu"};
    gpu.cls = compare::CompareClass::parse("ulp:4");
    gpu.why = "kernels are deterministic";

    const char* names[] = {"serial", "pp2", "pp4", "dp2"};
    for (int v = 0; v < 4; ++v) {
      VariantRun r;
      r.name = names[v];
      r.implementation = "reference";
      r.layout = v == 2 ? "Et|tt|tt|tmL" : "";
      r.schedule = v == 0 ? "" : "1f1b";
      r.pipeline_size = v == 1 ? 2 : v == 2 ? 4 : 1;
      r.data_parallel_size = v == 3 ? 2 : 1;
      r.record_mode = "full";
      r.wall_seconds = 1.5 + v;
      r.retrain_command =
          std::string("mtp-harness run --variant ") + names[v] + " --out 'runs/x y'";
      for (int step = 1; step <= 3; ++step) {
        // pp2 coincides with serial; pp4 and dp2 drift a little.
        const double drift = (v >= 2 ? 0.01 * v : 0.0) * step;
        const double lm = 10.5 - 0.5 * step + drift;
        r.losses.push_back({step, lm, {lm + 0.2, lm + 0.4}, lm + 0.1 * (2 * lm + 0.6)});
      }
      r.final_total_loss = r.losses.back().total;
      runs.push_back(r);
    }

    ExpectationResult pass{&equal, {}, true, false, {}};
    for (const char* other : {"pp2", "pp4"}) {
      PairResult p = pair("serial", other, 0.1);
      p.holds = true;
      p.result.equal = true;
      p.result.tensors = {diff(1, "loss", "total")};
      pass.pairs.push_back(p);
    }
    results.push_back(pass);

    PairResult p = pair("serial", "dp2", 0.2);
    auto& t = p.result.tensors;
    for (int step = 1; step <= 3; ++step) {
      t.push_back(diff(step, "loss", "total"));
      t.push_back(step == 1 ? diff(1, "grad", kEmbedding)
                            : diff(step, "grad", kEmbedding, step == 2 ? 3 : 40000, 5));
      t.push_back(step == 1 ? diff(1, "grad", kMlp)
                            : diff(step, "grad", kMlp, step == 2 ? kNan : 1000000, 2));
      t.push_back(diff(step, "grad", "output_layer.weight"));
      t.push_back(step == 3 ? digest_only(3, "weight", "decoder.layers.1.attn.qkv.weight")
                            : diff(step, "weight", "decoder.layers.1.attn.qkv.weight"));
      t.push_back(step == 2 ? structural(2, "weight", "final_norm.weight")
                            : diff(step, "weight", "final_norm.weight"));
    }
    p.result.first_divergence = t[7];  // step 2 grad/embedding…
    p.result.tensors_compared = 17;    // all but the structural one
    p.result.tensors_by_digest = 1;
    p.owners[kEmbedding] = StageOwner{0, 0, 0};
    p.owners[kMlp] = StageOwner{2, 0, 1};
    results.push_back(ExpectationResult{&dp, {p}, false, false, {}});
    results.push_back(skipped(gpu, {"gpu"}));
  }
};

TEST(MarkupTest, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(markup::escape("<script>alert(\"x\") & 'y'</script>"),
            "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;");
  EXPECT_EQ(markup::escape("plain ünïcode"), "plain ünïcode");
  EXPECT_EQ(markup::escape("&amp;"), "&amp;amp;");
}

TEST(MarkupTest, ShortensInTheMiddleWithoutSplittingUtf8) {
  EXPECT_EQ(markup::shorten("abcdefghij", 10), "abcdefghij");
  EXPECT_EQ(markup::shorten("abcdefghij", 5), "ab\u2026ij");
  EXPECT_EQ(markup::shorten("ääääääää", 4), "ää\u2026ä");
  EXPECT_EQ(markup::char_count("ää\u2026ä"), 4u);
}

TEST(SvgTest, NiceTicksCoverTheRangeInOneTwoFiveSteps) {
  const svg::Ticks t = svg::nice_ticks(0.13, 0.87, 6, false);
  EXPECT_DOUBLE_EQ(t.step, 0.2);
  ASSERT_EQ(t.values.size(), 6u);
  EXPECT_DOUBLE_EQ(t.values.front(), 0.0);
  EXPECT_DOUBLE_EQ(t.values.back(), 1.0);
  EXPECT_EQ(t.decimals, 1);
  const svg::Ticks steps = svg::nice_ticks(1, 3, 8, true);
  EXPECT_DOUBLE_EQ(steps.step, 1.0);
  EXPECT_THAT(steps.values, ElementsAre(1.0, 2.0, 3.0));
  const svg::Ticks flat = svg::nice_ticks(5, 5, 6, false);
  EXPECT_LT(flat.lo, 5.0);
  EXPECT_GT(flat.hi, 5.0);
}

TEST(SvgTest, FormatsNumbersCompactly) {
  EXPECT_EQ(svg::num(12.5), "12.5");
  EXPECT_EQ(svg::num(3.0), "3");
  EXPECT_EQ(svg::num(-0.001), "0");
  EXPECT_EQ(svg::num(1.234), "1.23");
  EXPECT_EQ(svg::tick_label(-0.0001, 2), "0.00");
  EXPECT_EQ(svg::tick_label(2.5, 1), "2.5");
  EXPECT_EQ(svg::text(1, 2, "a<b", R"(fill="#000")"),
            R"(<text x="1" y="2" fill="#000">a&lt;b</text>)");
}

TEST(HeatmapTest, ClassifiesCellsAndColoursUlpOnALogScale) {
  EXPECT_EQ(cell_kind(diff(1, "g", "n")), CellKind::kEqual);
  compare::TensorDiff signed_zero = diff(1, "g", "n");
  signed_zero.bit_mismatches = 1;
  EXPECT_EQ(cell_kind(signed_zero), CellKind::kZeroUlp);
  EXPECT_EQ(cell_kind(diff(1, "g", "n", 7, 1)), CellKind::kUlp);
  EXPECT_EQ(cell_kind(diff(1, "g", "n", kNan, 1)), CellKind::kNan);
  EXPECT_EQ(cell_kind(digest_only(1, "g", "n")), CellKind::kDigest);
  EXPECT_EQ(cell_kind(structural(1, "g", "n")), CellKind::kStructural);
  EXPECT_EQ(ulp_colour(1), "#fcbba1");
  EXPECT_EQ(ulp_colour(1000), "#fb6a4a");
  EXPECT_EQ(ulp_colour(1000000000), "#67000d");
  EXPECT_EQ(ulp_colour(uint64_t{1} << 62), "#67000d");
}

TEST(HeatmapTest, CapsRowsAndKeepsTheFirstDivergence) {
  PairResult p = pair("a", "b", 0.0);
  for (int i = 0; i < 300; ++i)
    p.result.tensors.push_back(diff(1, "grad", fmt::format("t{}", i), 2, 1));
  p.result.first_divergence = p.result.tensors.back();  // pretend: the last one
  const std::string html = heatmap(p, "h", HeatmapLimits{200, 30000});
  EXPECT_EQ(count(html, R"(class="cell")"), 200u);
  EXPECT_THAT(html, HasSubstr("200 of 300 tensors shown: those that differ at some step; 100 more "
                              "differing tensors omitted (at most 200 rows)."));
  EXPECT_EQ(count(html, R"(class="first-divergence" data-step="1" data-tensor="grad/t299")"), 1u);
  EXPECT_THAT(html, Not(HasSubstr(">grad/t199<")));
  EXPECT_THAT(html, HasSubstr(">grad/t198<"));
}

// Rows follow the order a step computes its groups (loss, grad, weight), not the order tensors
// appear in the records (step 0's weights first), so the top red row is the first divergence.
TEST(HeatmapTest, RowsAreInTheOrderAStepComputesThem) {
  PairResult p = pair("a", "b", 0.0);
  p.result.tensors = {diff(0, "weight", "w", 1, 1), diff(1, "loss", "total", 1, 1),
                      diff(1, "grad", "w", 1, 1), diff(1, "weight", "w", 1, 1)};
  p.result.first_divergence = p.result.tensors[0];
  const std::string html = heatmap(p, "h");
  const size_t loss = html.find(">loss/total<"), grad = html.find(">grad/w<"),
               weight = html.find(">weight/w<");
  ASSERT_NE(loss, std::string::npos);
  EXPECT_LT(loss, grad);
  EXPECT_LT(grad, weight);
}

TEST(HeatmapTest, GivesAMissingStepItsOwnRow) {
  PairResult p = pair("a", "b", 0.0);
  for (int step = 1; step <= 3; ++step) p.result.tensors.push_back(diff(step, "grad", "x", 1, 1));
  compare::TensorDiff missing;
  missing.step = 4;
  missing.structural = "step 4 is only in record A";
  p.result.first_divergence = missing;
  const std::string html = heatmap(p, "h");
  EXPECT_EQ(count(html, R"(class="cell")"), 2u * 4u);  // (whole step) and grad/x × steps 1..4
  EXPECT_EQ(count(html, R"(class="cell" fill="#2c7fb8")"), 1u);
  EXPECT_EQ(count(html, R"(class="cell" fill="#c4c7ce")"), 4u);  // not compared
  EXPECT_EQ(count(html, R"x(class="first-divergence" data-step="4" data-tensor="(whole step)")x"),
            1u);
  EXPECT_LT(html.find(">(whole step)<"), html.find(">grad/x<"));
}

TEST(HeatmapTest, NothingWhenNoTensorDiffers) {
  PairResult p = pair("a", "b", 0.0);
  p.result.tensors = {diff(1, "grad", "x"), diff(2, "grad", "x")};
  EXPECT_EQ(heatmap(p, "h"), "");
}

/// The points of every polyline of `html`, by series label, as (x, y) pixels.
std::map<std::string, std::vector<std::pair<double, double>>> polylines(const std::string& html) {
  const std::regex polyline(R"x(<polyline class="series" data-series="([^"]*)" points="([^"]*)")x");
  std::map<std::string, std::vector<std::pair<double, double>>> out;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), polyline);
       it != std::sregex_iterator(); ++it) {
    std::istringstream points((*it)[2]);
    for (std::string xy; points >> xy;) {
      out[(*it)[1]].emplace_back(std::stod(xy.substr(0, xy.find(','))),
                                 std::stod(xy.substr(xy.find(',') + 1)));
    }
  }
  return out;
}

// Issue 18 item 9: each pair's |Δ total loss| per step on a log scale, exact zeros on a "0" row
// of their own, instead of only overlapping curves of a few steps.
TEST(HtmlTest, DrawsEachPairsLossDifferenceOnALogScaleWithExactZerosOnTheirOwnRow) {
  Fixture f;
  const std::string html = to_html(f.sc, f.runs, f.results);
  const size_t begin = html.find("<section class=\"loss-differences\">");
  ASSERT_NE(begin, std::string::npos);
  const std::string section = html.substr(begin, html.find("</section>", begin) - begin);
  EXPECT_EQ(count(section, R"(<svg class="line-chart")"), 2u);  // gpu_equals_cpu was skipped
  EXPECT_THAT(section, HasSubstr(">pp_equals_serial: |Δ total loss|<"));
  EXPECT_THAT(section, HasSubstr(">dp_equals_serial: |Δ total loss|<"));
  const auto lines = polylines(section);
  ASSERT_EQ(lines.size(), 3u);
  // serial vs pp2: equal losses, flat on the "0" row (one decade below 0.024, the smallest
  // difference of the chart: pp4 drifts 1.2 · 0.02 · step in total loss).
  const auto& equal = lines.at("serial vs pp2");
  ASSERT_EQ(equal.size(), 3u);
  for (const auto& [x, y] : equal) EXPECT_EQ(y, equal[0].second);
  const std::regex zero_label(R"x(<text x="[^"]*" y="([^"]*)" [^>]*>0</text>)x");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(section, m, zero_label));
  EXPECT_NEAR(std::stod(m[1]) - 4, equal[0].second, 0.011);
  // serial vs pp4: 0.024, 0.048, 0.072 on decades 1e-3 ("0") .. 1e-1, 115 px per decade.
  const auto& drift = lines.at("serial vs pp4");
  ASSERT_EQ(drift.size(), 3u);
  EXPECT_NEAR(drift[0].second - drift[1].second, 115 * std::log10(2.0), 0.02);
  EXPECT_NEAR(drift[0].second - drift[2].second, 115 * std::log10(3.0), 0.02);
  EXPECT_NEAR(equal[0].second - drift[0].second, 115 * (std::log10(0.024) + 3), 0.02);
  for (const char* tick : {">1e-2</text>", ">1e-1</text>"}) EXPECT_THAT(section, HasSubstr(tick));
  EXPECT_THAT(section, Not(HasSubstr(">1e-3</text>")));  // that row is "0"
  EXPECT_THAT(section, Not(HasSubstr("No difference in total loss")));

  // Pairs whose losses never differ get one line, not a flat chart.
  for (VariantRun& v : f.runs) v.losses = f.runs[0].losses;
  const std::string same = to_html(f.sc, f.runs, f.results);
  const size_t at = same.find("<section class=\"loss-differences\">");
  ASSERT_NE(at, std::string::npos);
  const std::string flat = same.substr(at, same.find("</section>", at) - at);
  EXPECT_EQ(count(flat, "<svg"), 0u);
  EXPECT_THAT(flat, HasSubstr("No difference in total loss at any step, in any pair of: "
                              "pp_equals_serial, dp_equals_serial."));
}

TEST(HtmlTest, DrawsOneLossCurvePerVariantAndSeriesWithOnePointPerStep) {
  Fixture f;
  const std::string page = to_html(f.sc, f.runs, f.results);
  const size_t begin = page.find("<section class=\"losses\">");
  ASSERT_NE(begin, std::string::npos);
  const std::string html = page.substr(begin, page.find("</section>", begin) - begin);
  // total, lm, mtp_1, mtp_2: 4 charts × 4 variants.
  EXPECT_EQ(count(html, R"(<svg class="line-chart")"), 4u);
  const std::regex polyline(R"x(<polyline class="series" data-series="([^"]*)" points="([^"]*)")x");
  std::vector<std::string> series;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), polyline);
       it != std::sregex_iterator(); ++it) {
    series.push_back((*it)[1]);
    std::istringstream points((*it)[2]);
    std::vector<std::string> xy{std::istream_iterator<std::string>(points), {}};
    EXPECT_EQ(xy.size(), 3u) << (*it)[0];
    for (const std::string& p : xy) EXPECT_EQ(count(p, ","), 1u) << p;
  }
  ASSERT_EQ(series.size(), 16u);
  EXPECT_THAT(std::vector<std::string>(series.begin(), series.begin() + 4),
              ElementsAre("serial", "pp2", "pp4", "dp2"));
  for (const char* title : {">total loss<", ">LM loss<", ">MTP loss, depth 1 (mtp_1)<",
                            ">MTP loss, depth 2 (mtp_2)<"}) {
    EXPECT_THAT(html, HasSubstr(title));
  }
  // pp2 coincides with serial in every chart, and the legend says so.
  EXPECT_EQ(count(html, "pp2  (= serial)"), 4u);
  EXPECT_EQ(count(html, "pp4  (= serial)"), 0u);
}

TEST(HtmlTest, HeatmapHasOneCellPerTensorAndStepAndMarksTheFirstDivergence) {
  Fixture f;
  const std::string html = to_html(f.sc, f.runs, f.results);
  EXPECT_EQ(count(html, R"(<svg class="heatmap")"), 1u);
  // 4 differing tensors × 3 steps; loss/total and grad/output_layer.weight never differ.
  EXPECT_EQ(count(html, R"(class="cell")"), 12u);
  EXPECT_THAT(html, HasSubstr("4 of 6 tensors shown: those that differ at some step; 2 bitwise "
                              "equal at every step omitted."));
  EXPECT_EQ(count(html, R"(class="cell" fill="#000000")"), 1u);  // NaN vs number
  EXPECT_EQ(count(html, R"x(class="cell" fill="url(#pair-1-0-digest)")x"), 1u);
  EXPECT_EQ(count(html, R"(<pattern id="pair-1-0-digest")"), 1u);
  EXPECT_EQ(count(html, R"(class="cell" fill="#2c7fb8")"), 1u);  // structural
  EXPECT_EQ(count(html, R"(class="cell" fill="#ffffff")"), 6u);  // equal
  EXPECT_EQ(count(html, R"(class="cell" fill=")" + ulp_colour(3) + "\""), 1u);
  EXPECT_EQ(count(html, R"(class="cell" fill=")" + ulp_colour(40000) + "\""), 1u);
  EXPECT_EQ(count(html, R"(class="cell" fill=")" + ulp_colour(1000000) + "\""), 1u);
  EXPECT_EQ(count(html, R"(class="first-divergence" data-step="2" )"
                        R"(data-tensor="grad/embedding.word_embeddings.weight")"),
            1u);
  EXPECT_EQ(count(html, "\u25c0 first divergence (step 2)"), 1u);
  EXPECT_THAT(html, HasSubstr("<p class=\"tally\">18 tensor comparisons: 17 compared (1 of them "
                              "by digests alone); 6 outside the class, 4 differ in bits.</p>"));
  EXPECT_THAT(html, HasSubstr("digest mismatch (values not recorded)"));
  EXPECT_THAT(html, HasSubstr("NaN vs number"));
}

TEST(HtmlTest, NamesTheOwnerTheDivergenceAndBothRetrainCommands) {
  Fixture f;
  const std::string html = to_html(f.sc, f.runs, f.results);
  EXPECT_THAT(html, HasSubstr("Owning stage: <b>stage 0 (pipeline rank 0, virtual stage 0)</b>"));
  EXPECT_THAT(html, HasSubstr(R"(<pre class="first-divergence-text">step 2 )"
                              R"(grad/embedding.word_embeddings.weight[0, 3]: a=0.5 )"
                              R"((0x3f000000) b=0.50000006 (0x3f000001)</pre>)"));
  EXPECT_THAT(html, HasSubstr("<pre class=\"retrain\">mtp-harness run --variant serial --out "
                              "&#39;runs/x y&#39;</pre>"));
  EXPECT_THAT(html, HasSubstr("<pre class=\"retrain\">mtp-harness run --variant dp2 --out "
                              "&#39;runs/x y&#39;</pre>"));
  // The heatmap's owner column and row tooltips name the owners it knows, and only those.
  EXPECT_EQ(count(html, ">owning stage</text>"), 1u);
  EXPECT_EQ(count(html, ">0 (rank 0, virtual 0)</text>"), 1u);
  EXPECT_EQ(count(html, ">2 (rank 0, virtual 1)</text>"), 1u);
  EXPECT_EQ(count(html, " (rank "), 2u * 2u);
  EXPECT_EQ(count(html, R"(class="owner-change")"), 2u);  // 0 → 2 → unknown
  EXPECT_THAT(html, HasSubstr("<title>grad/decoder.layers.0.mlp.weight\nowning stage 2 (rank 0, "
                              "virtual 1)</title>"));
}

TEST(HtmlTest, ExpectationMatrixColoursPairsAndGivesClassAndWhy) {
  Fixture f;
  const std::string html = to_html(f.sc, f.runs, f.results);
  EXPECT_EQ(count(html, R"(<span class="pair pass")"), 2u);
  EXPECT_EQ(count(html, R"(<a class="pair fail" href="#pair-1-0")"), 1u);
  EXPECT_EQ(count(html, R"(id="pair-1-0")"), 1u);
  EXPECT_EQ(count(html, R"(<span class="pair skip" title="not evaluated: variant(s) not run: )"
                        R"(gpu">serial vs gpu<b>SKIP</b></span>)"),
            1u);
  EXPECT_THAT(html, HasSubstr("serial vs pp4<b>PASS</b>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"why\">all-reduce &lt;in order&gt; &amp; fixed</td>"));
  EXPECT_THAT(html, HasSubstr("<tr title=\"ulp:4: kernels are deterministic\">"));
  EXPECT_THAT(html,
              HasSubstr("<b>3</b> expectations: <b class=\"c-pass\">1 passed</b>, "
                        "<b class=\"c-fail\">1 failed</b>, <b class=\"c-skip\">1 skipped</b>"));
  EXPECT_THAT(html, HasSubstr(R"(<span class="badge verdict fail">FAIL</span>)"));
}

TEST(HtmlTest, EscapesUserTextAndIsSelfContainedAndBalanced) {
  Fixture f;
  const std::string html = to_html(f.sc, f.runs, f.results);
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, HasSubstr("<h1>smoke &lt;script&gt;alert(1)&lt;/script&gt; <span"));
  EXPECT_THAT(html, HasSubstr("<p>P &amp; V &quot;placements&quot; don&#39;t change bits</p>"));
  EXPECT_THAT(html, HasSubstr("<code>scenarios/a&amp;b.toml</code>"));
  EXPECT_THAT(html, Not(HasSubstr("http://")));
  EXPECT_THAT(html, Not(HasSubstr("https://")));
  EXPECT_THAT(html, Not(HasSubstr(" src=")));
  // 2 |Δ loss| charts, 4 loss charts, 1 heatmap.
  EXPECT_EQ(count(html, "<svg"), 7u);
  EXPECT_EQ(count(html, "</svg>"), 7u);
  EXPECT_EQ(count(html, "<section"), count(html, "</section>"));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.substr(html.size() - 8), "</html>\n");
}

TEST(HtmlTest, AFailingNegativeControlSaysNoTensorDiffers) {
  Fixture f;
  scenario::Expectation control;
  control.name = "dp_control";
  control.variants = {"serial", "pp2"};
  control.cls = compare::CompareClass::parse("differ");
  PairResult p = pair("serial", "pp2", 0.0);
  p.result.cls = control.cls;
  p.result.equal = true;
  p.result.tensors = {diff(1, "grad", "x"), diff(2, "grad", "x")};
  f.results.push_back(ExpectationResult{&control, {p}, false, false, {}});
  const std::string html = to_html(f.sc, f.runs, f.results);
  EXPECT_EQ(count(html, R"(<section class="failing-pair")"), 2u);
  EXPECT_EQ(count(html, "<p class=\"heatmap-note\">No tensor differs at any step.</p>"), 1u);
  EXPECT_THAT(html, HasSubstr("<p>FAILS differ: the records are bitwise equal ("));
  EXPECT_EQ(count(html, R"(<svg class="heatmap")"), 1u);  // only dp_equals_serial's
}

TEST(HtmlTest, SaysSoWhenNothingIsRecordedOrFails) {
  scenario::Scenario sc;
  sc.name = "empty";
  const std::string html = to_html(sc, {}, {});
  EXPECT_THAT(html, HasSubstr("<p>No losses recorded.</p>"));
  EXPECT_THAT(html, HasSubstr(R"(<span class="badge verdict skip">NOTHING EVALUATED</span>)"));
  EXPECT_THAT(html, Not(HasSubstr("Failing pairs")));
  EXPECT_EQ(count(html, "<svg"), 0u);
}

/// A pair over steps 1..6 of a 32-layer model (2 × 258 tensors): from step 3 the gradients of
/// layers ≥ 8 differ by growing ULP distances, from step 4 their weights too; one NaN at step 6,
/// a digest-only layer; the first divergence is step 3 grad of layer 8's first tensor.
PairResult many_tensors_pair() {
  PairResult p = pair("pp1_serial", "pp8_vpp4_interleaved", 1.0);
  const char* params[] = {"input_layernorm.weight",
                          "self_attention.linear_qkv.weight",
                          "self_attention.linear_proj.weight",
                          "pre_mlp_layernorm.weight",
                          "mlp.linear_fc1.weight",
                          "mlp.linear_fc2.weight",
                          "mtp_head.enorm.weight",
                          "mtp_head.eh_proj.weight"};
  for (int step = 1; step <= 6; ++step) {
    for (const char* group : {"grad", "weight"}) {
      const bool weight = std::string(group) == "weight";
      p.result.tensors.push_back(diff(step, group, "embedding.word_embeddings.weight"));
      for (int layer = 0; layer < 32; ++layer) {
        for (int k = 0; k < 8; ++k) {
          const std::string name = fmt::format("decoder.layers.{}.{}", layer, params[k]);
          const int since = weight ? 4 : 3;
          if (layer < 8 || step < since) {
            p.result.tensors.push_back(diff(step, group, name));
          } else if (step == 6 && layer == 31 && k == 5 && !weight) {
            p.result.tensors.push_back(diff(step, group, name, kNan, 1));
          } else if (step == 6 && layer == 8 && k < 4 && weight) {
            p.result.tensors.push_back(digest_only(step, group, name));
          } else {
            const uint64_t ulp = uint64_t{1} << (3 * (step - since) + (layer - 8) / 2 + k);
            p.result.tensors.push_back(diff(step, group, name, ulp, 1 + layer));
          }
          p.owners[name] = StageOwner{layer / 4, layer / 4 % 8, layer / 16};
        }
      }
      p.result.tensors.push_back(diff(step, group, "output_layer.weight"));
    }
  }
  for (const compare::TensorDiff& d : p.result.tensors) {
    if (d.failed()) {
      p.result.first_divergence = d;
      break;
    }
  }
  return p;
}

/// Renders `html` with headless Chromium into `dir`/report.png; returns the PNG's bytes ("" when
/// Chromium failed).
std::string render(const std::string& html, const std::string& dir, int width, int height) {
  {
    std::ofstream out(dir + "/report.html", std::ios::binary);
    out << html;
  }
  const std::string cmd = fmt::format(
      "timeout 60 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic "
      "--no-first-run --disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir={0}/profile --window-size={1},{2} --screenshot={0}/report.png "
      "file://{0}/report.html > {0}/chromium.log 2>&1",
      dir, width, height);
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << "\n" << testing_util::read_text(dir + "/chromium.log");
  return testing_util::read_text(dir + "/report.png");
}

/// Copies report.html and report.png of `dir` to /tmp/<name>.{html,png} for people to look at
/// (not part of the test: a failed copy is ignored).
void keep_copy(const testing_util::ScratchDir& dir, const std::string& name) {
  std::error_code ec;
  for (const char* ext : {"html", "png"}) {
    std::filesystem::copy_file(dir.file(std::string("report.") + ext), "/tmp/" + name + "." + ext,
                               std::filesystem::copy_options::overwrite_existing, ec);
  }
}

TEST(HtmlRenderTest, ChromiumRendersTheFailingPairPage) {
  if (!std::filesystem::exists("/usr/bin/chromium")) GTEST_SKIP() << "no /usr/bin/chromium";
  Fixture f;
  testing_util::ScratchDir dir;
  const std::string png = render(to_html(f.sc, f.runs, f.results), dir.path(), 1400, 2400);
  ASSERT_GT(png.size(), 20000u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  keep_copy(dir, "html_report_failing_pair");
}

TEST(HtmlRenderTest, ChromiumRendersHundredsOfTensorsCompactly) {
  if (!std::filesystem::exists("/usr/bin/chromium")) GTEST_SKIP() << "no /usr/bin/chromium";
  Fixture f;
  f.results[1].pairs[0] = many_tensors_pair();
  const std::string html = to_html(f.sc, f.runs, f.results);
  EXPECT_EQ(count(html, R"(class="cell")"), 200u * 6u);
  EXPECT_EQ(count(html,
                  "200 of 516 tensors shown: those that differ at some step; 132 bitwise "
                  "equal at every step omitted; 184 more differing tensors omitted (at "
                  "most 200 rows)."),
            1u);
  EXPECT_EQ(count(html, R"(class="first-divergence" data-step="3" )"
                        R"(data-tensor="grad/decoder.layers.8.input_layernorm.weight")"),
            1u);
  EXPECT_EQ(count(html, R"(class="owner-change")"), 6u);  // stages 2 … 7 of grad, 2 of weight
  testing_util::ScratchDir dir;
  const std::string png = render(html, dir.path(), 1400, 4000);
  ASSERT_GT(png.size(), 20000u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  keep_copy(dir, "html_report_many_tensors");
}

}  // namespace
}  // namespace mtp::report
