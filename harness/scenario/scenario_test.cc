#include "harness/scenario/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace mtp::scenario {
namespace {

using ::testing::HasSubstr;

const char* kMinimal = R"(
[scenario]
name = "mini"
[model]
num_layers = 2
hidden_size = 8
num_attention_heads = 2
mtp_num_layers = 1
seq_length = 8
[training]
steps = 2
[[variant]]
name = "a"
implementation = "reference"
layout = "Et|tmL"
pp = 2
[[variant]]
name = "b"
implementation = "candidate"
layout = "Et|tm|L"
pp = 3
[[expectation]]
name = "ab"
variants = ["a", "b"]
class = "bitwise"
steps = "2-"
exclude = ["embedding.*"]
why = "because"
)";

std::string error_of(const std::string& text) {
  try {
    parse_scenario(text, "test.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ScenarioTest, ParsesAMinimalScenario) {
  Scenario sc = parse_scenario(kMinimal, "test.toml");
  EXPECT_EQ(sc.name, "mini");
  EXPECT_EQ(sc.model.num_layers, 2);
  EXPECT_EQ(sc.model.num_query_groups, 2);  // defaults to num_attention_heads
  EXPECT_EQ(sc.training.steps, 2);
  ASSERT_EQ(sc.variants.size(), 2u);
  EXPECT_EQ(sc.variants[1].pipeline_size, 3);
  ASSERT_EQ(sc.expectations.size(), 1u);
  const auto& e = sc.expectations[0];
  EXPECT_EQ(e.cls.kind, compare::CompareClass::Kind::kBitwise);
  EXPECT_EQ(e.selection.steps, (std::set<int>{2}));
  EXPECT_EQ(e.selection.groups, (std::vector<std::string>{"loss", "grad", "weight"}));
  EXPECT_EQ(e.selection.exclude, (std::vector<std::string>{"embedding.*"}));
}

TEST(ScenarioTest, ErrorsNameFileLineColumnAndRule) {
  std::string t = kMinimal;
  EXPECT_THAT(error_of(t + "[bogus]\n"), HasSubstr("unknown key 'bogus'"));
  EXPECT_THAT(error_of(std::string(kMinimal).replace(t.find("layout = \"Et|tmL\""), 17,
                                                     "layot = \"Et|tmL\"")),
              HasSubstr("test.toml:15:1: variant \"a\": unknown key 'layot'"));
  EXPECT_THAT(
      error_of(std::string(kMinimal).replace(t.find("hidden_size = 8"), 15, "hidden_size = \"8\"")),
      HasSubstr("test.toml:6:15: [model].hidden_size must be an integer"));
  EXPECT_THAT(error_of(std::string(kMinimal).replace(t.find("class = \"bitwise\""), 17,
                                                     "class = \"bits\"")),
              HasSubstr("test.toml:25:9: expectation \"ab\""));
  EXPECT_THAT(
      error_of(std::string(kMinimal).replace(t.find("[\"a\", \"b\"]"), 10, "[\"a\", \"c\"]")),
      HasSubstr("unknown variant \"c\""));
  EXPECT_THAT(error_of(std::string(kMinimal).replace(t.find("why = \"because\""), 15, "")),
              HasSubstr("why is required"));
  EXPECT_THAT(error_of(std::string(kMinimal).replace(t.find("steps = \"2-\""), 12, "steps = [3]")),
              HasSubstr("step 3 is outside 0..2"));
  EXPECT_THAT(error_of("[scenario]\nname = \"x\"\n[model\n"), HasSubstr("test.toml:3:"));
  EXPECT_THAT(error_of("[scenario]\nname = \"x\"\n"), HasSubstr("at least one [[variant]]"));
  EXPECT_THAT(error_of(std::string(kMinimal).replace(t.find("implementation = \"reference\""), 28,
                                                     "implementation = \"ref\"")),
              HasSubstr("accepted \"reference\", \"candidate\""));
  EXPECT_THAT(error_of(std::string(kMinimal).replace(t.find("num_attention_heads = 2"), 23,
                                                     "num_attention_heads = 3")),
              HasSubstr("hidden_size = 8 must be divisible by num_attention_heads = 3"));
  // Integers past int are errors at their position, not wrapped (dp = 2^32 + 2 ran as DP 2).
  EXPECT_THAT(error_of(std::string(kMinimal).replace(t.find("pp = 3"), 6, "pp = 4294967299")),
              HasSubstr("test.toml:21:6: variant \"b\".pp = 4294967299 must be <= 64"));
  EXPECT_THAT(
      error_of(std::string(kMinimal).replace(t.find("pp = 3"), 6, "pp = 3\ndp = 4294967298")),
      HasSubstr(".dp = 4294967298 must be <= 64"));
  EXPECT_THAT(error_of(t + "first_divergence_step = 4294967297\n"),
              HasSubstr(".first_divergence_step = 4294967297 must be <= 999999"));
}

// Defect: data errors named no scenario file ("data: text file '' does not exist"), others no
// line, and a symlink loop read "does not exist". Every data error now names file:line:column
// of [data].path and the system's reason.
TEST(ScenarioTest, DataErrorsNameTheFileLineAndColumnOfThePath) {
  auto with_path = [](const std::string& path) {
    return std::string(kMinimal) + "[data]\npath = \"" + path + "\"\n";
  };
  EXPECT_THAT(error_of(with_path("")),
              HasSubstr("test.toml:30:8: [data].path = \"\": data: text file '' does not exist"));
  const std::string loop = ::testing::TempDir() + "scenario_loop.txt";
  std::remove(loop.c_str());
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  EXPECT_THAT(error_of(with_path(loop)),
              HasSubstr("test.toml:30:8: [data].path = \"" + loop + "\": data: text file '" + loop +
                        "': Too many levels of symbolic links"));
  EXPECT_THAT(error_of(with_path("/proc/self/mem")),
              HasSubstr("test.toml:30:8: [data].path = \"/proc/self/mem\": data: cannot read text "
                        "file '/proc/self/mem': Input/output error"));
  const std::string tiny = ::testing::TempDir() + "scenario_tiny.txt";
  std::ofstream(tiny) << "abc";
  EXPECT_THAT(error_of(with_path(tiny)),
              HasSubstr("test.toml:30:8: [data].path = \"" + tiny + "\": data: text:" + tiny +
                        " (3 bytes) has 3 "
                        "tokens, fewer than seq_length + 1 = 9"));
  EXPECT_THAT(error_of(std::string(kMinimal) + "[data]\nkind = \"text\"\n"),
              HasSubstr("(no error)"));
}

TEST(ScenarioTest, PositionsOfTablesAndKeysForLaterErrors) {
  Scenario sc = parse_scenario(kMinimal, "test.toml");
  EXPECT_EQ(sc.position("model.hidden_size"), "test.toml:6:15");
  EXPECT_EQ(sc.position("variant.b.layout"), "test.toml:20:10");
  EXPECT_EQ(sc.position("variant.b.schedule"), "test.toml:17:1") << "falls back to the table";
  EXPECT_EQ(sc.position("expectation.ab.exclude"), "test.toml:27:11");
  EXPECT_EQ(sc.position("nothing"), "test.toml");
  EXPECT_THAT(error_of("[scenario]\nname = \"x\"\n"),
              HasSubstr("test.toml:1:1: the scenario needs at least one"));
}

TEST(ScenarioTest, SelectionErrorsNameTheExpectationsPatterns) {
  std::string t = kMinimal;
  Scenario sc = parse_scenario(
      t.replace(t.find("exclude = [\"embedding.*\"]"), 25, "include = [\"nothing.*\"]"),
      "test.toml");
  try {
    check_expectation_selections(sc);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("test.toml:27:11: expectation \"ab\": include/exclude select no "
                          "tensor"));
  }
}

// Class "oracle": one or more variants against the float64 program; losses and grads only;
// step 1 unless steps says otherwise, never step 0 (it has no grads).
TEST(ScenarioTest, OracleExpectations) {
  auto with = [](const std::string& body) {
    return std::string(kMinimal) + "[[expectation]]\nname = \"o\"\nclass = \"oracle\"\n" +
           "why = \"shared code\"\n" + body;
  };
  Scenario sc = parse_scenario(with("variants = [\"a\"]\n"), "test.toml");
  const Expectation& e = sc.expectations.back();
  EXPECT_TRUE(e.oracle());
  EXPECT_EQ(e.class_text(), "oracle");
  EXPECT_EQ(e.selection.groups, (std::vector<std::string>{"loss", "grad", "weight"}));
  EXPECT_EQ(e.selection.steps, (std::set<int>{1}));
  EXPECT_FALSE(sc.expectations.front().oracle());
  EXPECT_EQ(sc.expectations.front().class_text(), "bitwise");
  EXPECT_TRUE(parse_scenario(with("variants = [\"a\", \"b\"]\nsteps = \"all\"\n"), "t.toml")
                  .expectations.back()
                  .selection.steps.empty());
  EXPECT_THAT(error_of(with("variants = []\n")), HasSubstr("at least one variant"));
  EXPECT_THAT(error_of(with("variants = [\"a\"]\nrecords = [\"batch\"]\n")),
              HasSubstr("test.toml:34:11: expectation \"o\": class \"oracle\" compares the loss, "
                        "grad and weight records only, not \"batch\""));
  EXPECT_THAT(error_of(with("variants = [\"a\"]\nsteps = [0, 1]\n")),
              HasSubstr("class \"oracle\" checks training steps (≥ 1)"));
  // A pairwise class still needs two variants, and the error says what one variant can do.
  std::string t = kMinimal;
  EXPECT_THAT(error_of(t.replace(t.find("[\"a\", \"b\"]"), 10, "[\"a\"]")),
              HasSubstr("at least two variants (class \"oracle\" checks one or more"));
  const std::string u = kMinimal;
  EXPECT_THAT(
      error_of(
          std::string(kMinimal).replace(u.find("class = \"bitwise\""), 17, "class = \"oracles\"")),
      HasSubstr(
          "rel_l2:B (B non-negative and finite), differ, or oracle, or replicas, or faster:X"));
}

// Class "replicas": one or more variants, the copies record only, and only when the run records
// its copies ([training] record_copies).
TEST(ScenarioTest, ReplicasExpectations) {
  auto with = [](const std::string& training, const std::string& body) {
    std::string t = kMinimal;
    t.replace(t.find("steps = 2\n"), 10, "steps = 2\n" + training);
    return t + "[[expectation]]\nname = \"r\"\nclass = \"replicas\"\nwhy = \"copies\"\n" + body;
  };
  const Scenario sc =
      parse_scenario(with("record_copies = true\n", "variants = [\"b\"]\n"), "test.toml");
  const Expectation& e = sc.expectations.back();
  EXPECT_EQ(e.judge, Judge::kReplicas);
  EXPECT_EQ(e.class_text(), "replicas");
  EXPECT_EQ(e.cls.kind, compare::CompareClass::Kind::kBitwise);
  EXPECT_EQ(e.selection.groups, (std::vector<std::string>{"copies"}));
  EXPECT_TRUE(e.selection.steps.empty());  // every step, the start step included
  EXPECT_TRUE(sc.training.record_copies);
  EXPECT_THAT(error_of(with("", "variants = [\"b\"]\n")),
              HasSubstr("expectation \"r\": class \"replicas\" reads the copies record: set "
                        "[training] record_copies = true"));
  EXPECT_THAT(
      error_of(with("record_copies = true\n", "variants = [\"b\"]\nrecords = [\"grad\"]\n")),
      HasSubstr("class \"replicas\" checks the copies record only"));
  EXPECT_THAT(error_of(with("record_copies = true\n", "variants = []\n")),
              HasSubstr("at least one variant"));
  // An expert-parallel variant has no copies record to judge: refused at the expectation.
  std::string ep = with("record_copies = true\n", "variants = [\"b\"]\n");
  ep.replace(ep.find("pp = 3\n"), 7, "pp = 3\ndp = 2\nep = 2\n");
  ep.replace(ep.find("seq_length = 8\n"), 15, "seq_length = 8\nnum_moe_experts = 4\n");
  EXPECT_THAT(error_of(ep), HasSubstr("expectation \"r\": class \"replicas\" cannot judge variant "
                                      "\"b\" (ep = 2)"));
  // include/exclude select parameters by name: a pattern matching none is an error.
  const Scenario none = parse_scenario(
      with("record_copies = true\n", "variants = [\"b\"]\ninclude = [\"nothing.*\"]\n"),
      "test.toml");
  try {
    check_expectation_selections(none);
    ADD_FAILURE() << "a pattern selecting no parameter passed";
  } catch (const InputError& err) {
    EXPECT_THAT(err.what(), HasSubstr("expectation \"r\": include/exclude select no tensor"));
  }
}

// A variant's cp and ep must fit the model (config::context_parallel_misfit,
// expert_parallel_misfit): refused when the scenario is parsed, at the key, whichever variants a
// run then selects.
TEST(ScenarioTest, ContextAndExpertParallelSizesMustFitTheModel) {
  auto with_b = [](const std::string& keys) {
    std::string t = kMinimal;
    t.replace(t.find("pp = 3\n"), 7, "pp = 3\n" + keys);
    return t;
  };
  EXPECT_THAT(error_of(with_b("cp = 3\n")),
              HasSubstr("test.toml:22:6: variant \"b\": cp = 3 needs seq_length to be a multiple "
                        "of 2 · cp = 6 (this model: 8)"));
  EXPECT_THAT(error_of(with_b("dp = 2\nep = 2\n")),
              HasSubstr("test.toml:23:6: variant \"b\": ep = 2 needs an MoE model"));
  EXPECT_NO_THROW(parse_scenario(with_b("cp = 2\n"), "test.toml"));
}

// mtp_num_layers unset is Megatron's None: no MTP (D = 0), so a layout with 'm' is refused (R5);
// a variant may override D.
TEST(ScenarioTest, MtpNumLayersUnsetMeansNoMtpAndAVariantMayOverrideIt) {
  std::string t = kMinimal;
  t.replace(t.find("mtp_num_layers = 1\n"), 19, "");
  EXPECT_THAT(error_of(t), HasSubstr("the number of 'm' must equal mtp_num_layers"));
  std::string u = t;
  u.replace(u.find("layout = \"Et|tmL\""), 17, "layout = \"Et|tmL\"\nmtp_num_layers = 1");
  u.replace(u.find("layout = \"Et|tm|L\""), 18, "layout = \"Et|tm|L\"\nmtp_num_layers = 1");
  const Scenario sc = parse_scenario(u, "test.toml");
  EXPECT_EQ(sc.model.mtp_num_layers, 0);
  EXPECT_EQ(sc.variant("a").mtp_num_layers, 1);
  EXPECT_EQ(config::variant_model(sc.model, sc.variant("a")).mtp_num_layers, 1);
  u.replace(u.find("layout = \"Et|tmL\"\nmtp_num_layers = 1"), 36,
            "layout = \"Et|tL\"\nmtp_num_layers = 65");
  EXPECT_THAT(error_of(u), HasSubstr("mtp_num_layers"));
}

// Class "faster:X": two layouts simulated for a preset (or the scenario's model) with a costs
// file; no variants, records or steps; every mistake named at its key.
TEST(ScenarioTest, FasterExpectations) {
  auto with = [](const std::string& body) {
    return std::string(kMinimal) + "[[expectation]]\nname = \"f\"\nwhy = \"balance\"\n" + body;
  };
  const std::string ok =
      "class = \"faster:0.9\"\nlayouts = [\"Et|(tt|)*30mL\", \"Ettt|(tt|)*29m|L\"]\n"
      "preset = \"dsv3\"\npp = 16\nmicrobatches = 64\ncosts = \"" MTP_SOURCE_DIR
      "/golden/perf/costs_h200_dsv3.json\"\n";
  const Scenario sc = parse_scenario(with(ok), "test.toml");
  const Expectation& e = sc.expectations.back();
  EXPECT_EQ(e.judge, Judge::kFaster);
  EXPECT_EQ(e.class_text(), "faster:0.9");
  ASSERT_TRUE(e.simulated.has_value());
  EXPECT_EQ(e.simulated->pipeline_size, 16);
  EXPECT_EQ(e.simulated->layouts[1], "Ettt|(tt|)*29m|L");
  EXPECT_NO_THROW(check_expectation_selections(sc));
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = ok;
    t.replace(t.find(from), from.size(), to);
    return with(t);
  };
  EXPECT_THAT(error_of(replace("faster:0.9", "faster:x")),
              HasSubstr("faster:X needs a finite X > 0"));
  EXPECT_THAT(error_of(replace("faster:0.9", "faster:0")),
              HasSubstr("faster:X needs a finite X > 0"));
  EXPECT_THAT(error_of(replace("pp = 16", "pp = 8\nvariants = [\"a\"]")),
              HasSubstr("class \"faster\" simulates layouts without training; remove variants"));
  EXPECT_THAT(error_of(replace("pp = 16", "pp = 15")), HasSubstr("rule R1"));
  EXPECT_THAT(error_of(replace("preset = \"dsv3\"", "preset = \"dsv4\"")),
              HasSubstr("preset \"dsv4\": accepted"));
  EXPECT_THAT(error_of(replace("golden/perf/costs_h200_dsv3.json", "no/such.json")),
              HasSubstr("no/such.json' does not exist"));
  EXPECT_THAT(error_of(replace(", \"Ettt|(tt|)*29m|L\"", "")), HasSubstr("layouts must name two"));
  // Pair keys of other classes are refused.
  EXPECT_THAT(error_of(with("class = \"bitwise\"\nvariants = [\"a\", \"b\"]\npp = 2\n")),
              HasSubstr("pp belongs to class \"faster:X\" only"));
}

// A resumed variant takes its source's settings and continues the source's record; everything
// that would make the resumed run impossible is an error at the key.
TEST(ScenarioTest, ResumedVariants) {
  auto with = [](const std::string& training, const std::string& variant) {
    std::string t = kMinimal;
    t.replace(t.find("steps = 2\n"), 10, "steps = 3\n" + training);
    const size_t at = t.find("[[expectation]]");
    return t.insert(at, "[[variant]]\nname = \"b_resumed\"\n" + variant);
  };
  const Scenario sc =
      parse_scenario(with("save_optimizer_state = true\n", "resume = \"b:1\"\n"), "t.toml");
  const config::VariantSpec& v = sc.variant("b_resumed");
  EXPECT_EQ(v.resume_of, "b");
  EXPECT_EQ(v.resume_step, 1);
  EXPECT_EQ(v.implementation, config::Implementation::kCandidate);
  EXPECT_EQ(v.layout, "Et|tm|L");
  EXPECT_EQ(v.pipeline_size, 3);
  const std::string opt = "save_optimizer_state = true\n";
  EXPECT_THAT(error_of(with("", "resume = \"b:1\"\n")),
              HasSubstr("resuming needs the optimizer state of \"b\"'s record: set [training] "
                        "save_optimizer_state = true"));
  EXPECT_THAT(error_of(with(opt, "resume = \"c:1\"\n")),
              HasSubstr("resume names \"c\", which is not a variant defined before it"));
  EXPECT_THAT(error_of(with(opt, "resume = \"b:3\"\n")),
              HasSubstr("resume step 3 must be a training step before the last (1 .. 2)"));
  EXPECT_THAT(error_of(with(opt, "resume = \"b:0\"\n")), HasSubstr("resume step 0"));
  EXPECT_THAT(error_of(with(opt, "resume = \"b\"\n")),
              HasSubstr("resume = \"b\" must be \"VARIANT:STEP\""));
  EXPECT_THAT(error_of(with(opt, "resume = \"b:x\"\n")), HasSubstr("must be \"VARIANT:STEP\""));
  EXPECT_THAT(error_of(with(opt, "resume = \"b:1\"\npp = 2\n")),
              HasSubstr("a resumed variant runs with the settings of the variant it resumes; "
                        "remove pp"));
  // A comparison with the resumed variant must select steps after the resume step.
  std::string compared = with(opt, "resume = \"b:1\"\n");
  compared +=
      "[[expectation]]\nname = \"r\"\nvariants = [\"b\", \"b_resumed\"]\nclass = "
      "\"bitwise\"\nwhy = \"resume\"\n";
  EXPECT_THAT(error_of(compared),
              HasSubstr("expectation \"r\": variant \"b_resumed\" resumes at step 1, so its record "
                        "holds steps 1..3: select steps after 1 (e.g. steps = \"2-\")"));
  EXPECT_NO_THROW(parse_scenario(compared + "steps = \"2-\"\n", "t.toml"));
  std::string chain = with(opt, "resume = \"b:1\"\n");
  chain.insert(chain.find("[[expectation]]"),
               "[[variant]]\nname = \"again\"\nresume = \"b_resumed:1\"\n");
  EXPECT_THAT(error_of(chain), HasSubstr("itself a resumed variant; resume its source \"b\""));
}

// Planted bugs: `inject` only where [scenario] declares fault_injection; a detector names a fault
// one of its variants plants and may name the first divergence whatever its class.
TEST(ScenarioTest, FaultInjectionIsRefusedUnlessDeclared) {
  std::string t = kMinimal;
  t.replace(t.find("pp = 3"), 6, "pp = 3\ninject = \"mtp_loss_main_mask_count\"");
  EXPECT_THAT(error_of(t),
              HasSubstr("test.toml:22:10: variant \"b\": inject plants a bug; only a "
                        "scenario whose [scenario] table says fault_injection = true"));
  std::string declared = t;
  declared.replace(declared.find("name = \"mini\""), 13, "name = \"mini\"\nfault_injection = true");
  const Scenario sc = parse_scenario(declared, "test.toml");
  EXPECT_TRUE(sc.fault_injection);
  EXPECT_EQ(sc.variant("b").inject, config::Fault::kMtpLossMainMaskCount);
  EXPECT_FALSE(sc.variant("a").inject.has_value());
  std::string bad = declared;
  bad.replace(bad.find("\"mtp_loss_main_mask_count\""), 26, "\"typo\"");
  EXPECT_THAT(error_of(bad), HasSubstr("inject = \"typo\": accepted \"none\", "
                                       "\"mtp_embedding_out_of_group\""));
  const std::string det =
      "[[expectation]]\nname = \"d\"\nvariants = [\"b\"]\nclass = \"oracle\"\n"
      "why = \"x\"\nfirst_divergence = \"loss/mtp_1\"\nfirst_divergence_step = 1\n";
  const Scenario with_detector =
      parse_scenario(declared + det + "detects = \"mtp_loss_main_mask_count\"\n", "test.toml");
  EXPECT_EQ(with_detector.expectations.back().detects, config::Fault::kMtpLossMainMaskCount);
  EXPECT_THAT(error_of(declared + det + "detects = \"mtp_labels_rolled_once_more\"\n"),
              HasSubstr("detects \"mtp_labels_rolled_once_more\", but none of its variants "
                        "injects it"));
  EXPECT_THAT(error_of(declared + det), HasSubstr("first_divergence applies to class \"differ\" "
                                                  "and to detectors (detects) only"));
  // A detector's target must be reachable: named, at a compared step, in a compared group.
  const std::string d2 =
      "[[expectation]]\nname = \"d\"\nvariants = [\"b\"]\nclass = \"oracle\"\n"
      "why = \"x\"\ndetects = \"mtp_loss_main_mask_count\"\n";
  EXPECT_THAT(error_of(declared + d2), HasSubstr("a detector needs first_divergence"));
  EXPECT_THAT(error_of(declared + d2 + "first_divergence = \"loss/mtp_1\"\n"),
              HasSubstr("a detector needs first_divergence"));
  EXPECT_THAT(
      error_of(declared + d2 + "first_divergence = \"loss/mtp_1\"\nfirst_divergence_step = 2\n"),
      HasSubstr("first_divergence_step = 2 is not among the compared steps"));
  EXPECT_THAT(
      error_of(declared + d2 + "first_divergence = \"batch/*\"\nfirst_divergence_step = 1\n"),
      HasSubstr("first_divergence = \"batch/*\" must be \"<group>/<tensor>\" with a "
                "compared group (loss, grad, weight, attr)"));
  EXPECT_THAT(error_of(declared + d2 + "first_divergence = \"lm\"\nfirst_divergence_step = 1\n"),
              HasSubstr("must be \"<group>/<tensor>\""));
  // inject = "none" plants nothing, so it needs no declaration.
  std::string none = kMinimal;
  none.replace(none.find("pp = 3"), 6, "pp = 3\ninject = \"none\"");
  EXPECT_FALSE(parse_scenario(none, "test.toml").variant("b").inject.has_value());
}

TEST(ScenarioTest, StepSpecs) {
  EXPECT_TRUE(parse_step_spec("all", 5).empty());
  EXPECT_EQ(parse_step_spec("2-", 4), (std::set<int>{2, 3, 4}));
  EXPECT_EQ(parse_step_spec("0,3-4", 4), (std::set<int>{0, 3, 4}));
  EXPECT_EQ(parse_step_spec("1", 4), (std::set<int>{1}));
  EXPECT_THROW(parse_step_spec("5", 4), InputError);
  EXPECT_THROW(parse_step_spec("3-1", 4), InputError);
  EXPECT_THROW(parse_step_spec("x", 4), InputError);
  EXPECT_THROW(parse_step_spec("", 4), InputError);
  EXPECT_THROW(parse_step_spec("-2", 4), InputError);
}

TEST(ScenarioTest, DefaultScenarioFileParses) {
  Scenario sc = load_scenario("scenarios/default.toml");
  EXPECT_EQ(sc.name, "default");
  EXPECT_EQ(sc.model.mtp_num_layers, 2);
  EXPECT_TRUE(sc.model.untie_embeddings);
  EXPECT_EQ(sc.training.clip_grad, 0.0);
  EXPECT_GE(sc.variants.size(), 6u);
  EXPECT_GE(sc.expectations.size(), 4u);
  EXPECT_EQ(sc.variant("ref_p4v2").layout, "E|t*3|(t|)*5mmL");
  EXPECT_THROW(sc.variant("nope"), InputError);
  EXPECT_THROW(load_scenario("scenarios/does-not-exist.toml"), InputError);
}

}  // namespace
}  // namespace mtp::scenario
