#include "harness/common/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "harness/common/error.h"
#include "harness/common/temp_file.h"
#include "harness/common/utf8.h"

namespace mtp {
namespace {

/// Throws InputError unless a file can be created in directory `dir` (probe: create and remove
/// a temporary there).
void check_can_create_in(const std::string& what, const std::string& shown,
                         const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    throw InputError(fmt::format("{} {}: directory '{}': {}", what, shown, printable(dir),
                                 std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw InputError(fmt::format("{} {}: '{}' is not a directory", what, shown, printable(dir)));
  }
  TempFile probe(dir + "/.mtp-harness-probe");
  int fd = -1;
  try {
    fd = probe.open_exclusive();
  } catch (const InfraError&) {
    throw InputError(fmt::format("{} {}: cannot create files in directory '{}': {}", what, shown,
                                 printable(dir), std::strerror(probe.create_error())));
  }
  ::close(fd);
}

}  // namespace

void check_output_file(const std::string& what, const std::string& path) {
  if (path.empty()) throw InputError(fmt::format("{}: the path is empty", what));
  const std::string shown = printable(path);
  if (path.back() == '/') throw InputError(fmt::format("{} {}: names a directory", what, shown));
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{} {}: is a directory", what, shown));
    if (!S_ISREG(st.st_mode)) {
      throw InputError(
          fmt::format("{} {}: exists and is not a regular file (a device, FIFO or "
                      "socket cannot be an output file)",
                      what, shown));
    }
  } else if (errno != ENOENT) {
    throw InputError(fmt::format("{} {}: {}", what, shown, std::strerror(errno)));
  }
  check_can_create_in(what, shown, parent_directory(path));
}

void check_output_directory(const std::string& what, const std::string& dir) {
  if (dir.empty()) throw InputError(fmt::format("{}: the path is empty", what));
  const std::string shown = printable(dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw InputError(
        fmt::format("{} {}: cannot create the directory: {}", what, shown, ec.message()));
  }
  check_can_create_in(what, shown, dir);
}

void write_file_atomically(const std::string& path, std::string_view content) {
  TempFile tmp(path);
  const int fd = tmp.open_exclusive();
  auto failed = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    tmp.remove();
    throw InfraError(fmt::format("{}: {}: {}", printable(path), what, std::strerror(err)));
  };
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      failed("write failed");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) failed("fsync failed");
  if (::close(fd) != 0) {
    const int err = errno;
    tmp.remove();
    throw InfraError(fmt::format("{}: close failed: {}", printable(path), std::strerror(err)));
  }
  tmp.commit();
}

}  // namespace mtp
