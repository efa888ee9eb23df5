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

}  // namespace mtp
