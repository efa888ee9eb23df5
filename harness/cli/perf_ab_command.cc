// `mtp-harness perf ab BIN_A BIN_B`: two builds' Google Benchmark programs run interleaved on
// this machine (A, B, A, B, …, one repetition per run, as google/benchmark's tools/compare.py
// does with two executables), then compared with perf compare's U test (harness/perf). Same
// machine, same moment: no baseline recorded elsewhere can make a false regression.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

#include "harness/cli/commands.h"
#include "harness/common/error.h"
#include "harness/common/output_file.h"
#include "harness/common/temp_file.h"
#include "harness/common/terminal_text.h"
#include "harness/perf/benchmark_json.h"
#include "harness/perf/perf_compare.h"

extern char** environ;

namespace mtp::cli {
namespace {

/// InputError unless `path` is a regular file this process may execute.
void require_executable(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) {
    throw InputError(
        fmt::format("{} {}: not an executable file (give a Google Benchmark "
                    "program, e.g. build/train_step_benchmark)",
                    flag, path));
  }
}

/// The last `n` lines of file `path` (for an error message).
std::string tail_of(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
    out += "\n  " + lines[i];
  }
  return out;
}

/// Runs `bin` once with one repetition of the benchmarks matching `filter`, its JSON to `json`
/// and its terminal output to `log`. Throws InfraError naming the program when it cannot start
/// or does not exit 0.
void run_once(const std::string& bin, const std::string& filter, const std::string& json,
              const std::string& log, int timeout_s) {
  std::vector<std::string> args{bin, "--benchmark_repetitions=1", "--benchmark_out=" + json,
                                "--benchmark_out_format=json"};
  if (!filter.empty()) args.push_back("--benchmark_filter=" + filter);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, bin.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    throw InfraError(fmt::format("perf ab: cannot start {}: {}", bin, std::strerror(err)));
  }
  const ChildProcessGuard guard(pid);  // a signal to perf ab kills the run too
  // A run that hangs is stopped after `timeout_s` (killed with its status reported), never
  // waited for forever.
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      throw InfraError(fmt::format("perf ab: cannot wait for {}: {}", bin, std::strerror(errno)));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      throw InfraError(
          fmt::format("perf ab: {} ran past --timeout {} s and was killed; its last "
                      "output:{}",
                      bin, timeout_s, tail_of(log, 12)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw InfraError(fmt::format("perf ab: {} {} ({}); its last output:{}", bin,
                                 WIFEXITED(status)
                                     ? fmt::format("exited with {}", WEXITSTATUS(status))
                                     : fmt::format("died of signal {}", WTERMSIG(status)),
                                 fmt::join(args.begin() + 1, args.end(), " "), tail_of(log, 12)));
  }
}

/// Appends every repetition of `run` to `into` (series by name, in first-seen order).
void append(const perf::BenchmarkFile& run, perf::BenchmarkFile& into) {
  if (into.context.empty()) into.context = run.context;
  for (const perf::BenchmarkSeries& s : run.benchmarks) {
    auto it = std::find_if(into.benchmarks.begin(), into.benchmarks.end(),
                           [&](const perf::BenchmarkSeries& t) { return t.name == s.name; });
    if (it == into.benchmarks.end()) {
      into.benchmarks.push_back(perf::BenchmarkSeries{s.name, {}, ""});
      it = std::prev(into.benchmarks.end());
    }
    it->real_time_ns.insert(it->real_time_ns.end(), s.real_time_ns.begin(), s.real_time_ns.end());
    if (it->error.empty()) it->error = s.error;
  }
}

}  // namespace

int run_perf_ab(const PerfAbOptions& opt) {
  std::string not_executable;  // both named when both are wrong
  for (const auto& [flag, path] : {std::pair{"BIN_A", opt.bin_a}, std::pair{"BIN_B", opt.bin_b}}) {
    try {
      require_executable(flag, path);
    } catch (const InputError& e) {
      not_executable += (not_executable.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  if (!not_executable.empty()) throw InputError(not_executable);
  if (opt.timeout_s < 1) {
    throw InputError(fmt::format("--timeout {}: must be at least 1 second", opt.timeout_s));
  }
  if (opt.rounds < 2 || opt.rounds > 1000) {
    throw InputError(
        fmt::format("--rounds {}: must be in [2, 1000] (a U test needs at least 2 "
                    "repetitions a side; 5 or more can reach p < 0.05)",
                    opt.rounds));
  }
  perf::PerfCompareOptions options;
  options.threshold = opt.threshold;
  options.alpha = opt.alpha;
  perf::check_options(options);
  if (!opt.json_path.empty()) {
    check_output_file("--json", opt.json_path);
    check_not_same_file("--json", opt.json_path, "BIN_A", opt.bin_a);
    check_not_same_file("--json", opt.json_path, "BIN_B", opt.bin_b);
  }
  const TempDirectory dir("mtp-harness-perf-ab");
  const bool progress = ::isatty(STDERR_FILENO) == 1;  // a progress line on a terminal only
  perf::BenchmarkFile a, b;
  a.path = opt.bin_a + " (A)";
  b.path = opt.bin_b + " (B)";
  for (int r = 0; r < opt.rounds; ++r) {
    // A then B in even rounds, B then A in odd ones: a drift of the machine over the run
    // (warming up, another job starting) does not favour one side.
    const bool a_first = r % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      const bool is_a = (k == 0) == a_first;
      const std::string& bin = is_a ? opt.bin_a : opt.bin_b;
      const std::string base = fmt::format("{}/{}_{}", dir.path(), is_a ? "a" : "b", r);
      run_once(bin, opt.filter, base + ".json", base + ".log", opt.timeout_s);
      perf::BenchmarkFile run;
      try {
        run = perf::read_benchmark_json(base + ".json");
      } catch (const InputError& e) {
        // The program exited 0 without usable results (a filter that matches nothing, …):
        // what it printed says why.
        throw InfraError(
            fmt::format("perf ab: {} ({}) wrote no usable benchmark JSON ({}); its "
                        "last output:{}",
                        bin, is_a ? "BIN_A" : "BIN_B", e.what(), tail_of(base + ".log", 12)));
      }
      append(run, is_a ? a : b);
    }
    if (progress) {
      raw_stderr() << "\r" << std::flush;
      std::cerr << fmt::format("perf ab: round {}/{}", r + 1, opt.rounds) << std::flush;
    }
  }
  if (progress) std::cerr << "\n";
  const perf::PerfComparison c = perf::compare_perf(a, b, options);
  std::cout << fmt::format(
      "# perf ab: {} rounds, A and B alternating on this machine, one "
      "repetition per run{}\n",
      opt.rounds, opt.filter.empty() ? "" : ", --benchmark_filter=" + opt.filter);
  std::cout << perf::format_perf_table(c);
  if (!opt.json_path.empty()) {
    write_file_atomically(opt.json_path, perf::perf_comparison_json(c).dump(2) + "\n");
  }
  return c.regressed() ? kExitMismatch : kExitOk;
}

}  // namespace mtp::cli
