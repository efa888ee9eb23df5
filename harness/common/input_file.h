// File: harness/common/input_file.h
//
// Whole-file reads of files the user names (corpora, datasets, benchmark JSON, goldens), with
// errors that name the file and its role, and never a hang: the file must be a regular file (a
// FIFO, a device such as /dev/zero, or a directory is refused before any read) of bounded size.
//
// Example:
//   const std::vector<uint8_t> bytes =
//       read_input_file(path, "benchmark JSON", kMaxSmallInputBytes);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mtp {

/// A bound for small text inputs (benchmark JSON, goldens): 256 MiB.
inline constexpr uint64_t kMaxSmallInputBytes = uint64_t{1} << 28;

/// Every byte of `path`; `what` names its role in errors ("text file", "benchmark JSON").
/// Opened without blocking and checked on the open descriptor (no race with a file replaced by
/// a FIFO). Throws InputError "<what> '<path>' does not exist", "<what> '<path>': <system
/// reason>" (a symlink loop, a permission), "… is not a regular file …", "… has N bytes, more
/// than the M bytes it may have here" (over `max_bytes`, also for /proc files that report size
/// 0), or "cannot read <what> '<path>': …". An empty file is returned empty.
std::vector<uint8_t> read_input_file(const std::string& path, const std::string& what,
                                     uint64_t max_bytes);

/// A user-named input read piece by piece (a corpus streamed by data prepare), with the checks
/// and messages of read_input_file: opened without blocking, a regular file, at most `max_bytes`
/// (also when it grows while read). Closed by the destructor.
class InputFile {
 public:
  /// Opens `path`; throws InputError as read_input_file does.
  InputFile(const std::string& path, const std::string& what, uint64_t max_bytes);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  /// Reads up to `n` bytes at the current position into `buf`; 0 at the end. Throws InputError
  /// when the file passes max_bytes or a read fails.
  size_t read(uint8_t* buf, size_t n);
  /// Reads exactly `n` bytes at byte `offset` (pread; the position is unchanged). Throws
  /// InputError when they cannot be read (the file shrank while read).
  void read_at(uint64_t offset, uint8_t* buf, size_t n) const;
  /// The size fstat reported at open (0 for /proc files).
  uint64_t size() const { return size_; }

 private:
  std::string what_, shown_;
  uint64_t max_bytes_ = 0, size_ = 0, read_ = 0;
  int fd_ = -1;
};

}  // namespace mtp
