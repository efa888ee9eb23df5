// End-to-end checks of issue 19's defects: no output of any command may overwrite an input or
// another output (defaults included), checked before any work; nothing the tool prints can
// drive the terminal; the memory check honours ulimit -v; training refuses non-finite start weights
// and an impossible Adam state; equiv's errors name its options; oversized names, negative sizes
// and huge scenario files are refused with a clear message. (Defect 6, ulimit -f, is
// CliFaultTest.FullDiskWhileWritingARecordFailsCleanly.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "harness/cli/cli_test_util.h"
#include "harness/common/test_util.h"
#include "harness/record/record.h"

namespace {

namespace fs = std::filesystem;
using mtp::cli_test::run;
using mtp::cli_test::tiny_scenario;
using mtp::testing_util::read_text;
using mtp::testing_util::ScratchDir;
using ::testing::HasSubstr;
using ::testing::Not;

/// Copies record `src` to `dst` tensor by tensor (root and step attributes too), letting `edit`
/// change any tensor on the way: a record with one corrupted value.
void copy_record(
    const std::string& src, const std::string& dst,
    const std::function<void(int, const std::string&, mtp::record::TensorData&)>& edit) {
  const mtp::record::RecordReader in(src);
  mtp::record::RecordWriter out(dst);
  for (const auto& [k, v] : in.attrs()) {
    if (k != "schema_version" && k != mtp::record::kFirstNonFiniteAttr) out.set_attr(k, v);
  }
  for (int step : in.steps()) {
    for (const auto& [k, v] : in.step_attrs(step)) out.set_step_attr(step, k, v);
    for (const std::string& group : in.groups(step)) {
      for (const std::string& name : in.names(step, group)) {
        mtp::record::TensorData t = in.read(step, group, name);
        edit(step, group, t);
        out.write(step, group, t);
      }
    }
  }
  out.commit();
}

bool has_byte(const std::string& text, char c) { return text.find(c) != std::string::npos; }

// Defect 1: check and run overwrote their own inputs and outputs with exit 0.
TEST(InputsCliTest, NoOutputOverwritesAnInputOrAnotherOutputDefaultsIncluded) {
  ScratchDir dir;
  const std::string sc = tiny_scenario(dir);
  const std::string sc_text = read_text(sc);
  std::ofstream(dir.file("corpus.txt")) << std::string(4096, 'a');
  std::string text = sc_text;
  const std::string gpl = "/usr/share/common-licenses/GPL-3";
  text.replace(text.find(gpl), gpl.size(), dir.file("corpus.txt"));
  std::ofstream(dir.file("data.toml")) << text;
  const std::string out = " --out " + dir.file("o") + " --variant ref_p2 --allow-skipped --quiet";
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases{
      {"check " + sc + out + " --json " + sc, "--json " + sc + ": is the scenario"},
      {"check " + sc + out + " --json " + dir.file("o/ref_p2.h5"),
       "the record of variant \"ref_p2\" " + dir.file("o/ref_p2.h5") + ": is --json"},
      {"check " + dir.file("data.toml") + out + " --html " + dir.file("corpus.txt"),
       "--html " + dir.file("corpus.txt") + ": is the corpus"},
      {"check " + sc + out + " --json " + dir.file("x") + " --html " + dir.file("x"),
       "--html " + dir.file("x") + ": is --json"},
      {"check " + sc + out + " --json " + dir.file("r.html"),
       "--html (default) " + dir.file("r.html") + ": is --json"},
      {"check " + sc + out + " --junit " + dir.file("o/report.json"),
       "is --json (default) " + dir.file("o") + "/report.json"},
      // The JUnit error report of the refusal must not overwrite what the refusal protected.
      {"check " + sc + out + " --junit " + sc, "--junit " + sc + ": is the scenario"},
      {"check " + sc + out + " --json " + dir.file("y") + " --junit " + dir.file("y"),
       "--junit " + dir.file("y") + ": is --json"},
  };
  for (const Case& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(c.says)) << c.args;
    EXPECT_THAT(r.out, HasSubstr("an output must not overwrite an input or another output"));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20)
        << "refused before training: " << c.args;
  }
  EXPECT_EQ(read_text(sc), sc_text);
  EXPECT_EQ(read_text(dir.file("corpus.txt")), std::string(4096, 'a'));
  EXPECT_FALSE(fs::exists(dir.file("x")));
  EXPECT_FALSE(fs::exists(dir.file("r.html")));
  EXPECT_FALSE(fs::exists(dir.file("y")));

  // run: the record must not replace the record it starts from.
  const auto made = run("run " + sc + " --variant ref_p2 --out " + dir.file("r.h5"));
  ASSERT_EQ(made.code, 0) << made.out;
  const std::string before = read_text(dir.file("r.h5"));
  for (const std::string& start :
       {"--init-from " + dir.file("r.h5"), "--resume " + dir.file("./r.h5") + ":1",
        "--init-from " + dir.file("sub/../r.h5") + ":1"}) {
    fs::create_directories(dir.file("sub"));
    const auto r = run("run " + sc + " --variant ref_p2 --out " + dir.file("r.h5") + " " + start);
    EXPECT_EQ(r.code, 2) << start << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr("an output must not overwrite an input")) << start;
  }
  EXPECT_EQ(read_text(dir.file("r.h5")), before);
  const auto into_scenario = run("run " + sc + " --variant ref_p2 --out " + sc);
  EXPECT_EQ(into_scenario.code, 2) << into_scenario.out;
  EXPECT_EQ(read_text(sc), sc_text);
}

// Defect 12: ESC and control bytes from names, patterns and layout strings reached the terminal.
TEST(InputsCliTest, NothingFromTheInputCanDriveTheTerminal) {
  ScratchDir dir;
  const std::string esc_name = dir.file("a\x1b]0;pwned\x07.h5");
  std::ofstream(esc_name) << "not a record";
  // Raw bytes inside single quotes: the shell passes them as they are.
  for (const std::string& args :
       {std::string("layout 'E|t\x1b[2J|L' --pp 2"), "info '" + esc_name + "'",
        "compare '" + esc_name + "' '" + esc_name + "' --include '\x1b[31m*'",
        std::string("layout 'E|t\xc2\x9b"
                    "2J|L' --pp 2")}) {
    const auto q = run(args);
    EXPECT_EQ(q.code, 2) << args << ": " << q.out;
    EXPECT_FALSE(has_byte(q.out, '\x1b')) << args << ": " << q.out;
    EXPECT_FALSE(has_byte(q.out, '\x07')) << args;
    EXPECT_THAT(q.out, Not(HasSubstr("\xc2\x9b"))) << args;
    if (has_byte(args, '\x1b')) {
      EXPECT_THAT(q.out, HasSubstr("\\x1b")) << args;
    }
  }
}

// Defect 13: init_from NaN weights trained on to NaN losses; --resume took negative second
// moments; both with exit 0.
TEST(InputsCliTest, NonFiniteWeightsAndImpossibleAdamStateAreRefused) {
  ScratchDir dir;
  const std::string sc = tiny_scenario(dir);
  const auto made =
      run("run " + sc + " --variant ref_p2 --save-optimizer-state --out " + dir.file("r.h5"));
  ASSERT_EQ(made.code, 0) << made.out;
  copy_record(dir.file("r.h5"), dir.file("nan.h5"),
              [](int step, const std::string& group, mtp::record::TensorData& t) {
                if (step == 1 && group == "weight" && t.name == "decoder.final_layernorm.weight") {
                  const float nan = NAN;
                  std::memcpy(t.bytes.data() + 4, &nan, 4);
                }
              });
  const auto init = run("run " + sc + " --variant ref_p2 --init-from " + dir.file("nan.h5") +
                        ":1 --out " + dir.file("i.h5"));
  EXPECT_EQ(init.code, 2) << init.out;
  EXPECT_THAT(init.out, HasSubstr("steps/000001/weight/decoder.final_layernorm.weight: element 1 "
                                  "is nan (1 of 16 elements not finite)"));
  EXPECT_FALSE(fs::exists(dir.file("i.h5")));
  copy_record(dir.file("r.h5"), dir.file("neg.h5"),
              [](int step, const std::string& group, mtp::record::TensorData& t) {
                if (step == 1 && group == "optimizer" &&
                    t.name == "decoder.final_layernorm.weight.exp_avg_sq") {
                  const float neg = -1.0f;
                  std::memcpy(t.bytes.data() + 8, &neg, 4);
                }
              });
  const auto resume = run("run " + sc + " --variant ref_p2 --resume " + dir.file("neg.h5") +
                          ":1 --out " + dir.file("j.h5"));
  EXPECT_EQ(resume.code, 2) << resume.out;
  EXPECT_THAT(resume.out, HasSubstr("decoder.final_layernorm.weight.exp_avg_sq: element 2 is -1 "
                                    "(1 of 16 elements not finite or negative): an impossible "
                                    "Adam state"));
  EXPECT_FALSE(fs::exists(dir.file("j.h5")));
}

// Defect 14: errors pointing at text the user never sees, unbounded names and files, and a
// negative size wrapped to 2^64.
TEST(InputsCliTest, MessagesNameWhatTheUserWrote) {
  ScratchDir dir;
  const auto equiv = run("equiv 'E|t*3|(t|)*5mmL' 'E|tx|L' --pp 2");
  EXPECT_EQ(equiv.code, 2) << equiv.out;
  EXPECT_THAT(equiv.out, Not(HasSubstr("<mtp-harness equiv>")));
  EXPECT_THAT(equiv.out, HasSubstr("layout B \"E|tx|L\" (P = 2"));
  // A rule found in the scenario equiv generates is reported at the option it came from.
  const auto schedule = run("equiv 'E|t*3|(t|)*5mmL' 'E|t*3|(t|)*5mmL' --pp 2 --schedule 1f1b");
  EXPECT_EQ(schedule.code, 2) << schedule.out;
  EXPECT_THAT(schedule.out, Not(HasSubstr("<mtp-harness equiv>")));
  EXPECT_THAT(schedule.out, HasSubstr("error: equiv: layout A \"E|t*3|(t|)*5mmL\" (P = 2): "
                                      "variant \"A\": 1f1b schedule: non-interleaved 1F1B needs "
                                      "V=1"));

  std::string text = read_text(tiny_scenario(dir));
  text.replace(text.find("name = \"ref_p1\""), 15, "name = \"" + std::string(5000, 'v') + "\"");
  std::ofstream(dir.file("long.toml")) << text;
  const auto long_name = run("check " + dir.file("long.toml"));
  EXPECT_EQ(long_name.code, 2) << long_name.out.substr(0, 2000);
  EXPECT_THAT(long_name.out, HasSubstr("long.toml:"));
  EXPECT_THAT(long_name.out, HasSubstr("at most 200 bytes (it names the record file)"));
  EXPECT_LT(long_name.out.size(), 2000u) << "the name is not echoed whole";

  const auto negative = run("check " + dir.file("tiny.toml") + " --max-memory -5G");
  EXPECT_EQ(negative.code, 2) << negative.out;
  EXPECT_THAT(negative.out, HasSubstr("a size has no sign"));
  EXPECT_THAT(negative.out, Not(HasSubstr("18446744073709551611")));

  {
    std::ofstream(dir.file("huge.toml")) << "[scenario]\n";
    fs::resize_file(dir.file("huge.toml"), uint64_t{6} << 30);  // sparse: no disk used
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto huge = run("check " + dir.file("huge.toml"));
  EXPECT_EQ(huge.code, 2) << huge.out;
  EXPECT_THAT(huge.out, HasSubstr("the scenario file has 6442450944 bytes; a scenario may have at "
                                  "most 4194304 (4 MiB)"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

// Defect 9: the memory check ignored the process limits (ulimit -v), failing after 34 s.
TEST(InputsCliTest, TheMemoryCheckHonoursTheAddressSpaceLimit) {
  ScratchDir dir;
  std::string text = read_text(tiny_scenario(dir));
  text.replace(text.find("vocab_size = 256"), 16, "vocab_size = 2000000");
  text.replace(text.find("hidden_size = 16"), 16, "hidden_size = 256");
  std::ofstream(dir.file("big.toml")) << text;
  const auto t0 = std::chrono::steady_clock::now();
  // 3 GiB of address space: LibTorch alone maps part of it; the run needs more than the rest.
  const auto r = mtp::cli_test::run_shell(
      "ulimit -v 3145728 && " + std::string(MTP_HARNESS_BIN) + " check " + dir.file("big.toml") +
      " --variant ref_p2 --allow-skipped --quiet --out " + dir.file("o") + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ulimit -v and -d"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

}  // namespace
