// File: harness/cli/cli_test_util.h
//
// Runs the mtp-harness binary (MTP_HARNESS_BIN, set by CMake) for the end-to-end CLI tests, and
// the tiny scenario several of them train.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "harness/common/test_util.h"

namespace mtp::cli_test {

/// The whole file at `path` ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Exit code and stdout + stderr of one run.
struct Result {
  int code;
  std::string out;
};

/// Runs shell command `cmd` (sh -c); its stdout only unless `cmd` redirects stderr.
inline Result run_shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

/// Runs `mtp-harness <args>` through the shell (args are not quoted for you), in `cwd` when it
/// is not empty.
inline Result run(const std::string& args, const std::string& cwd = "") {
  return run_shell((cwd.empty() ? "" : "cd '" + cwd + "' && ") + std::string(MTP_HARNESS_BIN) +
                   " " + args + " 2>&1");
}

/// A tiny scenario (2 layers, H 16, 2 steps of 2 microbatches): reference and candidate at P = 2
/// must be equal; P = 1 against P = 2 "bitwise" is the failing pair the reports need (P = 1 sums
/// the word embedding's uses in another order, README.md). `seed` makes another scenario text.
inline std::string tiny_scenario(const testing_util::ScratchDir& dir, int seed = 1234) {
  const std::string path = dir.file("tiny.toml");
  std::ofstream(path) << R"([scenario]
name = "tiny"
[model]
num_layers = 2
hidden_size = 16
ffn_hidden_size = 32
num_attention_heads = 2
vocab_size = 256
seq_length = 8
micro_batch_size = 1
mtp_num_layers = 1
[training]
steps = 2
num_microbatches = 2
seed = )" << seed << R"(
[data]
kind = "text"
path = "/usr/share/common-licenses/GPL-3"
[[variant]]
name = "ref_p2"
implementation = "reference"
pp = 2
[[variant]]
name = "cand_p2"
implementation = "candidate"
pp = 2
[[variant]]
name = "ref_p1"
implementation = "reference"
[[expectation]]
name = "placement"
variants = ["ref_p2", "cand_p2"]
class = "bitwise"
why = "the candidate on the reference's layout is the reference"
[[expectation]]
name = "p1_fails"
variants = ["ref_p2", "ref_p1"]
class = "bitwise"
records = ["grad"]
why = "a pair that fails: P = 1 sums the embedding's uses in another order"
)";
  return path;
}

}  // namespace mtp::cli_test
