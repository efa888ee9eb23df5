// Whole-file reads of user-named inputs (input_file.h).

#include "harness/common/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "harness/common/error.h"
#include "harness/common/utf8.h"

namespace mtp {

std::vector<uint8_t> read_input_file(const std::string& path, const std::string& what,
                                     uint64_t max_bytes) {
  const std::string shown = printable(path);
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) throw InputError(fmt::format("{} '{}' does not exist", what, shown));
    // The system's reason: a symlink loop, a permission, a path component not a directory.
    throw InputError(fmt::format("{} '{}': {}", what, shown, std::strerror(errno)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    throw InputError(fmt::format("cannot read {} '{}': {}", what, shown, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw InputError(fmt::format("{} '{}' is not a regular file (a directory, FIFO or device "
                                 "cannot be read as one)", what, shown));
  }
  const auto too_large = [&](uint64_t size) {
    return InputError(fmt::format("{} '{}' has {} bytes, more than the {} bytes it may have "
                                  "here", what, shown, size, max_bytes));
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) throw too_large(st.st_size);
  // Read to the end (files in /proc report size 0), at most max_bytes + 1 bytes.
  std::vector<uint8_t> bytes(std::max<size_t>(static_cast<size_t>(st.st_size), 1) + 1);
  size_t got = 0;
  while (true) {
    if (got == bytes.size()) {
      if (got > max_bytes) throw too_large(got);
      bytes.resize(static_cast<size_t>(std::min<uint64_t>(2 * uint64_t{got}, max_bytes + 1)));
    }
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(fmt::format("cannot read {} '{}': {}", what, shown, std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace mtp
