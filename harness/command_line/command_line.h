// File: harness/command_line/command_line.h
//
// mtp-harness's command line, in one place: every subcommand, its options, their validation and
// help (CLI11). Torch-free, so that the launcher (harness/launcher) answers --help and refuses a
// bad flag before LibTorch is loaded; the engine binary (harness/cli) parses the same argv again
// with it and runs the subcommand.
//
// Example:
//   mtp::cli::CommandLine cl;
//   if (const std::optional<int> done = mtp::cli::parse_command_line(argc, argv, cl)) return *done;
//   if (cl.command == mtp::cli::Command::kCheck) return run_check(cl.check);
#pragma once

#include <optional>
#include <string>

#include "harness/command_line/options.h"

namespace mtp::cli {

/// The subcommand a command line names (golden and perf have sub-subcommands).
enum class Command {
  kCheck,
  kRun,
  kCompare,
  kReplay,
  kInfo,
  kGoldenCheck,
  kGoldenUpdate,
  kEquiv,
  kLayout,
  kSchedule,
  kDataPrepare,
  kPerfCompare,
  kPerfAb,
  kPerfMerge,
  kOracle,
  kSelftest,
  kSimulate,
  kCalibrate,
};

/// Every subcommand's options; parse_command_line fills those of `command`.
struct CommandLine {
  Command command = Command::kCheck;
  CheckOptions check;
  RunCommandOptions run;
  CompareOptions compare;
  ReplayOptions replay;
  std::string info_path;
  bool info_json = false;
  GoldenOptions golden;  ///< golden.update is set for kGoldenUpdate
  EquivOptions equiv;
  LayoutOptions layout;
  ScheduleOptions schedule;
  DataPrepareOptions data_prepare;
  PerfCompareCommandOptions perf_compare;
  PerfAbOptions perf_ab;
  PerfMergeOptions perf_merge;
  OracleOptions oracle;
  SelftestOptions selftest;
  SimulateOptions simulate;
  CalibrateOptions calibrate;
};

/// Parses argv into `cl`. Returns std::nullopt when `cl.command` is to run; otherwise the exit
/// code after printing what was asked or what is wrong: 0 after --help or --version (on
/// stdout), kExitUsage (2) after "mtp-harness: error: <what> (see mtp-harness <subcommand>
/// --help)" on stderr for an unknown subcommand, a missing or unknown flag, or a value a
/// validator refuses (an empty path, a signed byte size, a value out of range or not a member).
std::optional<int> parse_command_line(int argc, char** argv, CommandLine& cl);

}  // namespace mtp::cli
