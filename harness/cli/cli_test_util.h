// File: harness/cli/cli_test_util.h
//
// Runs the mtp-harness binary (MTP_HARNESS_BIN, set by CMake) for the end-to-end CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace mtp::cli_test {

/// Exit code and stdout + stderr of one run.
struct Result {
  int code;
  std::string out;
};

/// Runs `mtp-harness <args>` through the shell (args are not quoted for you), in `cwd` when it
/// is not empty.
inline Result run(const std::string& args, const std::string& cwd = "") {
  const std::string cmd = (cwd.empty() ? "" : "cd '" + cwd + "' && ") +
                          std::string(MTP_HARNESS_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

}  // namespace mtp::cli_test
