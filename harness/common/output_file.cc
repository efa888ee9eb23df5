#include "harness/common/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "harness/common/error.h"
#include "harness/common/temp_file.h"
#include "harness/common/utf8.h"

namespace mtp {
namespace {

/// The longest file name component (NAME_MAX of Linux file systems).
constexpr size_t kMaxNameBytes = 255;
/// ".tmp-" + up to 10 pid digits + "-" + 12 hex digits (TempFile's name, temp_file.cc).
constexpr size_t kTemporarySuffixBytes = 28;

}  // namespace
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
  // The temporary beside it is "<name>.tmp-<pid>-<12 hex digits>" (temp_file.h).
  const size_t slash = path.find_last_of('/');
  const size_t name_bytes = path.size() - (slash == std::string::npos ? 0 : slash + 1);
  if (name_bytes + kTemporarySuffixBytes > kMaxNameBytes) {
    throw InputError(
        fmt::format("{} {}: the name has {} bytes; with its temporary's suffix "
                    "(.tmp-<pid>-<random>, up to {} bytes) it would pass the file "
                    "system's {}",
                    what, shown, name_bytes, kTemporarySuffixBytes, kMaxNameBytes));
  }
  // The kernel takes at most PATH_MAX − 1 bytes in one path (ENAMETOOLONG): checked now, not
  // when the report is written after the work.
  if (path.size() + kTemporarySuffixBytes >= PATH_MAX) {
    throw InputError(fmt::format(
        "{} {}...: the path has {} bytes; with its temporary's suffix "
        "(up to {} bytes) it would pass the system's limit of {} bytes "
        "(PATH_MAX)",
        what, printable(path.substr(0, 60)), path.size(), kTemporarySuffixBytes, PATH_MAX - 1));
  }
  check_can_create_in(what, shown, parent_directory(path));
}

namespace {

/// `path` with its directory resolved (realpath) when that directory exists, else as given.
std::string resolved(const std::string& path) {
  const std::string dir = parent_directory(path);
  const size_t slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  char buf[PATH_MAX];
  return ::realpath(dir.c_str(), buf) != nullptr ? std::string(buf) + "/" + name : path;
}

}  // namespace

void check_not_same_file(const std::string& what, const std::string& path,
                         const std::string& other_what, const std::string& other) {
  if (path.empty() || other.empty()) return;
  struct stat a, b;
  const bool a_exists = ::stat(path.c_str(), &a) == 0, b_exists = ::stat(other.c_str(), &b) == 0;
  const bool same = a_exists && b_exists
                        ? a.st_dev == b.st_dev && a.st_ino == b.st_ino
                        : !a_exists && !b_exists && resolved(path) == resolved(other);
  if (same) {
    throw InputError(
        fmt::format("{} {}: is {} {}: an output must not overwrite an input or "
                    "another output",
                    what, printable(path), other_what, printable(other)));
  }
}

void FileRoles::input(const std::string& what, const std::string& path) {
  if (path.empty()) return;
  for (const Entry& e : entries_) {
    if (e.is_output) check_not_same_file(e.what, e.path, what, path);
  }
  entries_.push_back({what, path, false});
}

void FileRoles::output(const std::string& what, const std::string& path) {
  if (path.empty()) return;
  // The collision first: it is the more useful message when both apply (a path into a
  // directory that the command itself makes).
  for (const Entry& e : entries_) check_not_same_file(what, path, e.what, e.path);
  check_output_file(what, path);
  entries_.push_back({what, path, true});
}

void FileRoles::planned_output(const std::string& what, const std::string& path) {
  if (path.empty()) return;
  for (const Entry& e : entries_) check_not_same_file(what, path, e.what, e.path);
  entries_.push_back({what, path, true});
}

void FileRoles::output_directory(const std::string& what, const std::string& dir) {
  if (dir.empty()) return;
  for (const Entry& e : entries_) check_not_same_file(what, dir, e.what, e.path);
  entries_.push_back({what, dir, true});
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
