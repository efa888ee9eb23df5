// parse_command_line: options land in the right struct, help and bad flags end with the right
// exit code and a message naming the subcommand's help.
#include "harness/command_line/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/common/error.h"

namespace mtp::cli {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  std::optional<int> done;
  CommandLine cl;
  std::string out, err;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "mtp-harness");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  Parsed p;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  p.done = parse_command_line(static_cast<int>(args.size()), argv.data(), p.cl);
  p.out = ::testing::internal::GetCapturedStdout();
  p.err = ::testing::internal::GetCapturedStderr();
  return p;
}

TEST(CommandLineTest, OptionsLandInTheirSubcommandsStruct) {
  const Parsed c = parse({"check", "s.toml", "--variant", "a", "--variant", "b", "--max-memory",
                          "2K", "--record", "digest", "--junit", "j.xml"});
  ASSERT_FALSE(c.done.has_value()) << c.err;
  EXPECT_EQ(c.cl.command, Command::kCheck);
  EXPECT_EQ(c.cl.check.scenario, "s.toml");
  EXPECT_EQ(c.cl.check.only_variants, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.cl.check.max_memory, 2048u);
  EXPECT_EQ(c.cl.check.training.record, "digest");
  EXPECT_EQ(c.cl.check.junit_path, "j.xml");

  const Parsed u = parse({"golden", "update", "--dry-run"});
  ASSERT_FALSE(u.done.has_value()) << u.err;
  EXPECT_EQ(u.cl.command, Command::kGoldenUpdate);
  EXPECT_TRUE(u.cl.golden.update);
  EXPECT_TRUE(u.cl.golden.dry_run);
  const Parsed g = parse({"golden", "check"});
  EXPECT_EQ(g.cl.command, Command::kGoldenCheck);
  EXPECT_FALSE(g.cl.golden.update);

  const Parsed e = parse({"equiv", "E|tt|L", "EttL", "--pp", "2", "--pp-b", "1"});
  ASSERT_FALSE(e.done.has_value()) << e.err;
  EXPECT_EQ(e.cl.command, Command::kEquiv);
  EXPECT_EQ(e.cl.equiv.layout_a, "E|tt|L");
  EXPECT_EQ(e.cl.equiv.pipeline_size, 2);
  EXPECT_EQ(e.cl.equiv.pipeline_size_b, 1);

  const Parsed i = parse({"info", "r.h5", "--json"});
  EXPECT_EQ(i.cl.command, Command::kInfo);
  EXPECT_EQ(i.cl.info_path, "r.h5");
  EXPECT_TRUE(i.cl.info_json);
  EXPECT_EQ(parse({"perf", "merge", "a.json", "--out", "m.json"}).cl.command, Command::kPerfMerge);
}

TEST(CommandLineTest, HelpAndVersionExitZeroOnStdout) {
  const Parsed h = parse({"--help"});
  EXPECT_EQ(h.done, 0);
  EXPECT_THAT(h.out, HasSubstr("check"));
  EXPECT_THAT(h.out, HasSubstr("equiv"));
  const Parsed ch = parse({"check", "--help"});
  EXPECT_EQ(ch.done, 0);
  EXPECT_THAT(ch.out, HasSubstr("--max-memory"));
  EXPECT_THAT(ch.out, HasSubstr("exit 0: all hold, 1: one fails, 2: bad input, 3: failure"));
  EXPECT_EQ(parse({"--version"}).done, 0);
}

TEST(CommandLineTest, BadCommandLinesExitTwoNamingTheSubcommandsHelp) {
  const Parsed missing = parse({"run"});
  EXPECT_EQ(missing.done, kExitUsage);
  EXPECT_EQ(missing.err,
            "mtp-harness: error: --variant is required (see mtp-harness run --help)\n");
  const Parsed unknown = parse({"check", "--bogus"});
  EXPECT_EQ(unknown.done, kExitUsage);
  EXPECT_THAT(unknown.err, HasSubstr("(see mtp-harness check --help)"));
  const Parsed nested = parse({"golden", "update", "--bogus"});
  EXPECT_THAT(nested.err, HasSubstr("(see mtp-harness golden update --help)"));
  const Parsed sub = parse({"chekc"});
  EXPECT_EQ(sub.done, kExitUsage);
  EXPECT_EQ(sub.err,
            "mtp-harness: error: unknown subcommand 'chekc' (subcommands: check, run, "
            "compare, replay, info, oracle, selftest, simulate, calibrate, golden, equiv, layout, "
            "schedule, data, perf; "
            "see "
            "mtp-harness --help)\n");
  EXPECT_THAT(parse({"check", "--max-memory", "-5G"}).err, HasSubstr("a size has no sign"));
  EXPECT_THAT(parse({"check", "--out", ""}).err, HasSubstr("must not be empty"));
  EXPECT_EQ(parse({"layout", "E|t|L", "--pp", "0"}).done, kExitUsage);
  EXPECT_EQ(parse({}).done, kExitUsage);
  // Real numbers must be finite: NaN passes every range comparison, so it is refused by name.
  for (const char* bad : {"nan", "inf", "-1", "11", "0.1x"}) {
    const Parsed t = parse({"calibrate", "--preset", "tiny", "--out", "c.json", "--pp", "2",
                            "--validate", "Et*2|t*2mL", "--tolerance", bad});
    EXPECT_EQ(t.done, kExitUsage) << bad;
    EXPECT_THAT(t.err, HasSubstr("--tolerance: must be a finite number in [0, 10]")) << bad;
  }
  EXPECT_THAT(parse({"oracle", "check", "x", "--bound", "nan"}).err,
              HasSubstr("--bound: must be a finite number > 0"));
  EXPECT_THAT(parse({"oracle", "check", "x", "--bound", "0"}).err,
              HasSubstr("--bound: must be a finite number > 0"));
}

}  // namespace
}  // namespace mtp::cli
