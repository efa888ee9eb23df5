// File: harness/common/temp_file.h
//
// Temporaries of outputs in progress. Every output file is first written under a unique name in
// its destination directory, "<final>.tmp-<pid>-<12 random hex digits>", created exclusively
// (O_CREAT | O_EXCL: an existing file, or a symlink planted under that name, is never opened and
// so never followed), and renamed to its final name only when complete, flushed and synced.
// While it exists the temporary is registered, and install_signal_cleanup() makes SIGINT,
// SIGTERM and SIGHUP remove every registered temporary before the process exits with
// 128 + the signal number (crash signals remove them too).
//
// Example:
//   TempFile tmp("runs/x/report.json");
//   int fd = tmp.open_exclusive();   // or create tmp.path() exclusively yourself, then created()
//   ... write, check, close ...
//   tmp.commit();                     // fsync, rename to runs/x/report.json, fsync the directory
#pragma once

#include <sys/types.h>

#include <string>

namespace mtp {

/// TempFile: the temporary of one output file. Removed by the destructor unless committed.
class TempFile {
 public:
  /// Picks a fresh temporary name beside `final_path` and registers it for removal on a signal
  /// (before it exists: a signal between creating and registering would leave it behind);
  /// creates nothing yet.
  explicit TempFile(std::string final_path);
  /// Removes the temporary (when it was created and not committed) and unregisters it.
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& final_path() const { return final_path_; }

  /// Creates path() exclusively for writing (O_EXCL, O_NOFOLLOW, O_CLOEXEC, mode 0666 & ~umask)
  /// and returns the file descriptor (the caller closes it). Throws InfraError on failure
  /// (create_error() then holds the errno).
  int open_exclusive();
  /// The errno of the last failed open_exclusive(), 0 when none failed.
  int create_error() const { return create_error_; }
  /// Says that the caller created path() exclusively itself (e.g. H5Fcreate with H5F_ACC_EXCL):
  /// from now on the destructor and remove() delete it.
  void created();
  /// Syncs the temporary to disk, renames it to final_path() and syncs the directory. The
  /// caller has closed every handle that writes to it. Throws InfraError (and removes the
  /// temporary) on failure.
  void commit();
  /// Removes the temporary now (when created) and unregisters it; idempotent, never throws.
  void remove() noexcept;

 private:
  std::string final_path_;
  std::string path_;
  int slot_ = -1;  ///< registration for signal cleanup, −1: none (committed or removed)
  bool created_ = false;
  int create_error_ = 0;
};

/// While alive, registers child process `pid` with the signal cleanup: SIGINT, SIGTERM, SIGHUP
/// or a crash of this process kills it (SIGKILL) before exiting, so no child is orphaned.
class ChildProcessGuard {
 public:
  explicit ChildProcessGuard(pid_t pid);
  ~ChildProcessGuard();
  ChildProcessGuard(const ChildProcessGuard&) = delete;
  ChildProcessGuard& operator=(const ChildProcessGuard&) = delete;

 private:
  int slot_ = -1;
};

/// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove every registered temporary and
/// exit with 128 + the signal number, and for SIGABRT, SIGSEGV, SIGBUS, SIGFPE and SIGILL (an
/// uncaught exception, a crash) that remove them and die of the signal as before. Call once,
/// early in main().
void install_signal_cleanup();

/// TempDirectory: a fresh private directory under $TMPDIR (or /tmp), made with mkdtemp, removed
/// with its contents by the destructor (never throws there), and by the signal cleanup
/// (install_signal_cleanup) when a signal or a crash ends the process first. For records a
/// command makes and does not keep (replay, compare --localize, equiv, golden).
class TempDirectory {
 public:
  /// Creates "<tmp>/<prefix>-XXXXXX". Throws InfraError when it cannot.
  explicit TempDirectory(const std::string& prefix);
  ~TempDirectory();
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int slot_ = -1;  ///< registration for signal cleanup
};

/// Removes `path` and, when it is a directory, everything under it (symbolic links themselves,
/// never what they point to); a missing path is no error; never throws. POSIX nftw, not
/// std::filesystem::remove_all: LibTorch wheels (2.11 on the GPU machine) export their own copy
/// of remove_all, which the dynamic linker binds a caller's to, and which jumps to address 0
/// (cuda-gdb: `std::filesystem::remove_all(path const&, error_code&) from libtorch.so`, called
/// from ~TempDirectory: every `golden`, `replay`, `equiv` and `compare --localize` there crashed).
void remove_tree(const std::string& path) noexcept;

/// The directory part of `path` ("." when it has none, "/" for a file in the root).
std::string parent_directory(const std::string& path);

}  // namespace mtp
