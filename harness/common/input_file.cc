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

InputFile::InputFile(const std::string& path, const std::string& what, uint64_t max_bytes)
    : what_(what), shown_(printable(path)), max_bytes_(max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    if (errno == ENOENT) throw InputError(fmt::format("{} '{}' does not exist", what_, shown_));
    // The system's reason: a symlink loop, a permission, a path component not a directory.
    throw InputError(fmt::format("{} '{}': {}", what_, shown_, std::strerror(errno)));
  }
  struct stat st;
  const bool stat_ok = ::fstat(fd_, &st) == 0;
  const int err = errno;
  auto fail = [&](const std::string& why) {
    ::close(fd_);
    fd_ = -1;
    throw InputError(why);
  };
  if (!stat_ok) fail(fmt::format("cannot read {} '{}': {}", what_, shown_, std::strerror(err)));
  if (!S_ISREG(st.st_mode)) {
    fail(
        fmt::format("{} '{}' is not a regular file (a directory, FIFO or device cannot be read "
                    "as one)",
                    what_, shown_));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > max_bytes_) {
    fail(fmt::format("{} '{}' has {} bytes, more than the {} bytes it may have here", what_, shown_,
                     size_, max_bytes_));
  }
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t InputFile::read(uint8_t* buf, size_t n) {
  while (true) {
    const ssize_t got = ::read(fd_, buf, n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw InputError(fmt::format("cannot read {} '{}': {}", what_, shown_, std::strerror(errno)));
    }
    read_ += static_cast<uint64_t>(got);
    if (read_ > max_bytes_) {  // /proc files report size 0; a file may grow while read
      throw InputError(fmt::format("{} '{}' has more than the {} bytes it may have here", what_,
                                   shown_, max_bytes_));
    }
    return static_cast<size_t>(got);
  }
}

void InputFile::read_at(uint64_t offset, uint8_t* buf, size_t n) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, buf + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw InputError(
          fmt::format("cannot read {} '{}' at byte {}: {}", what_, shown_, offset + done,
                      got == 0 ? "the file shrank while it was read" : std::strerror(errno)));
    }
    done += static_cast<size_t>(got);
  }
}

std::vector<uint8_t> read_input_file(const std::string& path, const std::string& what,
                                     uint64_t max_bytes) {
  InputFile in(path, what, max_bytes);
  // Read to the end (files in /proc report size 0).
  std::vector<uint8_t> bytes(static_cast<size_t>(std::max<uint64_t>(in.size(), 1)) + 1);
  size_t got = 0;
  while (true) {
    if (got == bytes.size()) {
      bytes.resize(static_cast<size_t>(std::min<uint64_t>(2 * uint64_t{got}, max_bytes + 1)));
    }
    const size_t n = in.read(bytes.data() + got, bytes.size() - got);
    if (n == 0) break;
    got += n;
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace mtp
