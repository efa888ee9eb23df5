#include "harness/data/file_bytes.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "harness/common/error.h"

namespace mtp::data {

std::vector<uint8_t> read_file_bytes(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw InputError(fmt::format("data: {} '{}' does not exist", what, path));
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw InputError(fmt::format("data: {} '{}' is not a regular file (a directory, FIFO or "
                                 "device cannot be a data file)", what, path));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxDataFileBytes) {
    throw InputError(fmt::format("data: {} '{}' has {} bytes, more than the 1 GiB a data file "
                                 "may have here", what, path, size));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(fmt::format("data: cannot open {} '{}': {}", what, path,
                                 std::strerror(errno)));
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(fmt::format("data: error while reading {} '{}'", what, path));
  return bytes;
}

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw InputError(fmt::format("data: cannot create '{}': {}", tmp, std::strerror(errno)));
    }
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(fmt::format("data: error while writing '{}'", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError(fmt::format("data: cannot rename '{}' to '{}': {}", tmp, path, why));
  }
}

}  // namespace mtp::data
