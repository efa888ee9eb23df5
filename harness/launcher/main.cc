// mtp-harness: the command users run. It answers --help and --version and refuses a bad command
// line (exit 2, naming the subcommand's help) without loading LibTorch — in milliseconds, where
// loading LibTorch takes about a second — then pins the CPU kernels' environment
// (environment.h) and executes the engine binary, mtp-harness-engine, installed beside it, with
// the same arguments (the same process: signals, exit codes and the PID are the engine's).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "harness/command_line/command_line.h"
#include "harness/common/environment.h"
#include "harness/common/error.h"
#include "harness/common/terminal_text.h"

namespace {

/// mtp-harness-engine in the directory of this executable (/proc/self/exe, symlinks resolved).
std::string engine_path() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(".") : self.parent_path()) / "mtp-harness-engine";
}

}  // namespace

int main(int argc, char** argv) {
  mtp::install_terminal_escaping();  // no byte from input can drive the terminal
  mtp::cli::CommandLine cl;
  if (const std::optional<int> done = mtp::cli::parse_command_line(argc, argv, cl)) return *done;
  mtp::set_cpu_dispatch_pins();  // before the engine loads OpenBLAS or MKL: no second start
  const std::string engine = engine_path();
  std::cout.flush();
  std::cerr.flush();
  ::execv(engine.c_str(), argv);
  std::cerr << "mtp-harness: failure: cannot run " << engine << ": " << std::strerror(errno)
            << " (the engine is built beside mtp-harness: ci/build.sh mtp-harness)\n";
  return mtp::kExitInfra;
}
