// File: harness/record/record_test_util.h
//
// Test-only helpers shared by the record and compare tests: a scratch directory that removes
// itself (harness/common/test_util.h), and whole-file byte reads.
#pragma once

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "harness/common/test_util.h"

namespace mtp::record::testing_util {

using ::mtp::testing_util::ScratchDir;

/// read_bytes: the whole content of `path`.
inline std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// write_bytes: replaces `path` with `bytes`.
inline void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace mtp::record::testing_util
