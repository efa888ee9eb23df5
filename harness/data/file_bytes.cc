#include "harness/data/file_bytes.h"

#include <fmt/format.h>
#include <fcntl.h>
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
#include "harness/common/output_file.h"
#include "harness/common/utf8.h"

namespace mtp::data {

std::vector<uint8_t> read_file_bytes(const std::string& path, const std::string& what) {
  const std::string shown = printable(path);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      throw InputError(fmt::format("data: {} '{}' does not exist", what, shown));
    }
    // The system's reason: a symlink loop, a permission, a path component not a directory.
    throw InputError(fmt::format("data: {} '{}': {}", what, shown, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw InputError(fmt::format("data: {} '{}' is not a regular file (a directory, FIFO or "
                                 "device cannot be a data file)", what, shown));
  }
  const auto too_large = [&](std::uintmax_t size) {
    return InputError(fmt::format("data: {} '{}' has {} bytes, more than the 1 GiB a data file "
                                  "may have here", what, shown, size));
  };
  if (static_cast<std::uintmax_t>(st.st_size) > kMaxDataFileBytes) throw too_large(st.st_size);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw InputError(fmt::format("data: cannot open {} '{}': {}", what, shown,
                                 std::strerror(errno)));
  }
  // Read to the end (files in /proc report size 0), at most kMaxDataFileBytes + 1 bytes.
  std::vector<uint8_t> bytes(std::max<size_t>(static_cast<size_t>(st.st_size), 1) + 1);
  size_t got = 0;
  while (true) {
    if (got == bytes.size()) {
      if (got > kMaxDataFileBytes) {
        ::close(fd);
        throw too_large(got);
      }
      bytes.resize(std::min<size_t>(2 * got, kMaxDataFileBytes + 1));
    }
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw InputError(fmt::format("data: cannot read {} '{}': {}", what, shown,
                                   std::strerror(err)));
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(got);
  return bytes;
}

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_file_atomically(
      path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace mtp::data
