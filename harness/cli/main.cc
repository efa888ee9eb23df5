// mtp-harness-engine: the binary that runs mtp-harness's subcommands (LibTorch and everything
// else). Users run the launcher, mtp-harness (harness/launcher), which answers --help and refuses
// a bad command line before LibTorch is loaded, pins the CPU kernels' environment and then
// executes this binary with the same arguments; this one parses them again
// (harness/command_line) and runs the subcommand. README.md documents the subcommands.
#include <c10/util/Exception.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <string>

#include "harness/cli/commands.h"
#include "harness/command_line/command_line.h"
#include "harness/common/environment.h"
#include "harness/common/error.h"
#include "harness/common/temp_file.h"
#include "harness/common/terminal_text.h"

namespace {

/// Runs the chosen subcommand and maps its exceptions to exit codes (harness/common/error.h).
int run_command(const std::function<int()>& command) {
  try {
    return command();
  } catch (const mtp::InputError& e) {
    std::cerr << "mtp-harness: error: " << e.what() << "\n";
    return mtp::kExitUsage;
  } catch (const mtp::InfraError& e) {
    std::cerr << "mtp-harness: failure: " << e.what() << "\n";
    return mtp::kExitInfra;
  } catch (const c10::Error& e) {
    std::cerr << "mtp-harness: LibTorch error: " << e.what_without_backtrace() << "\n";
    return mtp::kExitInfra;
  } catch (const std::exception& e) {
    std::cerr << "mtp-harness: internal error: " << e.what() << "\n";
    return mtp::kExitInfra;
  }
}

/// `code`, or kExitInfra in place of a verdict (0 or 1) when standard output could not be
/// written (a full disk, /dev/full): a result nobody could read is not a success.
int check_stdout(int code) {
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "mtp-harness: failure: cannot write standard output (the result is lost)\n";
    if (code == mtp::kExitOk || code == mtp::kExitMismatch) return mtp::kExitInfra;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  mtp::pin_cpu_dispatch(argc, argv);  // may re-execute this process once (environment.h)
  mtp::install_signal_cleanup();      // signals and crashes remove temporaries (SIGTERM: exit 143)
  mtp::install_terminal_escaping();   // no byte from input can drive the terminal
  mtp::cli::CommandLine cl;
  if (const std::optional<int> done = mtp::cli::parse_command_line(argc, argv, cl)) return *done;
  return check_stdout(run_command([&]() -> int {
    using mtp::cli::Command;
    switch (cl.command) {
      case Command::kCheck:
        return mtp::cli::run_check(cl.check);
      case Command::kRun:
        return mtp::cli::run_one(cl.run);
      case Command::kInfo:
        return mtp::cli::run_info(cl.info_path, cl.info_json);
      case Command::kCompare:
        return mtp::cli::run_compare(cl.compare);
      case Command::kGoldenCheck:
      case Command::kGoldenUpdate:
        return mtp::cli::run_golden(cl.golden);
      case Command::kEquiv:
        return mtp::cli::run_equiv(cl.equiv);
      case Command::kReplay:
        return mtp::cli::run_replay(cl.replay);
      case Command::kLayout:
        return mtp::cli::run_layout(cl.layout);
      case Command::kSchedule:
        return mtp::cli::run_schedule(cl.schedule);
      case Command::kDataPrepare:
        return mtp::cli::run_data_prepare(cl.data_prepare);
      case Command::kPerfCompare:
        return mtp::cli::run_perf_compare(cl.perf_compare);
      case Command::kPerfAb:
        return mtp::cli::run_perf_ab(cl.perf_ab);
      case Command::kPerfMerge:
        return mtp::cli::run_perf_merge(cl.perf_merge);
      case Command::kOracle:
        return mtp::cli::run_oracle(cl.oracle);
      case Command::kSelftest:
        return mtp::cli::run_selftest(cl.selftest);
      case Command::kSimulate:
        return mtp::cli::run_simulate(cl.simulate);
      case Command::kCalibrate:
        return mtp::cli::run_calibrate(cl.calibrate);
    }
    return static_cast<int>(mtp::kExitUsage);
  }));
}
