#include "harness/data/file_bytes.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "harness/common/error.h"
#include "harness/common/input_file.h"
#include "harness/common/output_file.h"
#include "harness/common/utf8.h"

namespace mtp::data {

std::vector<uint8_t> read_file_bytes(const std::string& path, const std::string& what) {
  try {
    return read_input_file(path, what, kMaxDataFileBytes);
  } catch (const InputError& e) {
    throw InputError(fmt::format("data: {}", e.what()));
  }
}

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_file_atomically(
      path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace mtp::data
