// TempFile and the signal cleanup of registered temporaries (temp_file.h).

#include "harness/common/temp_file.h"

#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <random>

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp {
namespace {

// The registry of live temporaries: fixed slots, so that the signal handler reads it without
// locks or allocation (only atomics and system calls are used there).
constexpr int kSlots = 64;
constexpr size_t kMaxPath = 4096;  // PATH_MAX: open() takes no longer path
enum SlotState : int { kFree = 0, kBusy = 1, kReady = 2 };
enum SlotKind : int { kFileSlot = 0, kDirectorySlot = 1 };
struct Slot {
  std::atomic<int> state{kFree};
  int kind = kFileSlot;
  char path[kMaxPath];
};
Slot g_slots[kSlots];

/// Registers `path` (a file, or a directory removed with its content) for removal on a signal;
/// returns the slot. Throws InternalError when full.
int register_temp(const std::string& path, int kind = kFileSlot) {
  MTP_INTERNAL_ASSERT(path.size() < kMaxPath, fmt::format("temporary path too long: {}", path));
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (g_slots[i].state.compare_exchange_strong(expected, kBusy)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].kind = kind;
      g_slots[i].state.store(kReady, std::memory_order_release);
      return i;
    }
  }
  MTP_INTERNAL_ASSERT(false, fmt::format("more than {} temporaries at once", kSlots));
  return -1;
}

void unregister_temp(int slot) { g_slots[slot].state.store(kFree, std::memory_order_release); }

/// Child processes the signal cleanup kills (perf ab's benchmark runs): 0 = a free slot.
std::atomic<pid_t> g_children[8];

/// One getdents64 record (linux/dirent.h's struct linux_dirent64).
struct DirEntry64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

/// Removes everything in the open directory `dir` with system calls only (async-signal-safe:
/// getdents64, openat, unlinkat, close; no allocation), directories to `depth_left` levels.
void remove_contents_signal_safe(int dir, int depth_left) {
  alignas(8) char buf[4096];
  for (int pass = 0; pass < 4; ++pass) {  // entries removed while listing may hide others
    bool removed = false;
    ::lseek(dir, 0, SEEK_SET);
    for (;;) {
      const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        const auto* e = reinterpret_cast<const DirEntry64*>(buf + at);
        at += e->reclen;
        const char* name = e->name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        if (e->type == DT_DIR && depth_left > 0) {
          const int sub = ::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0) {
            remove_contents_signal_safe(sub, depth_left - 1);
            ::close(sub);
          }
          removed = ::unlinkat(dir, name, AT_REMOVEDIR) == 0 || removed;
        } else {
          removed = ::unlinkat(dir, name, 0) == 0 || removed;
        }
      }
    }
    if (!removed) break;
  }
}

void remove_temps() {
  for (auto& c : g_children) {
    const pid_t pid = c.load(std::memory_order_acquire);
    if (pid > 0) ::kill(pid, SIGKILL);  // no orphan keeps running (or writing) after us
  }
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) != kReady) continue;
    if (s.kind == kFileSlot) {
      ::unlink(s.path);
      continue;
    }
    const int dir = ::open(s.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir >= 0) {
      remove_contents_signal_safe(dir, 16);
      ::close(dir);
    }
    ::rmdir(s.path);
  }
}

extern "C" void remove_temps_and_exit(int sig) {
  remove_temps();
  ::_exit(128 + sig);
}

/// Writes `text` to stderr (async-signal-safe).
void write_stderr(const char* text) {
  size_t n = std::strlen(text);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

/// A crash (abort, segfault, ...): remove the temporaries, print where it happened (the frames'
/// binaries and offsets: `addr2line -f -C -e BINARY OFFSET` names them), then die of the same
/// signal as before (the handler was installed with SA_RESETHAND, so the default action runs:
/// status, core dump).
extern "C" void remove_temps_and_reraise(int sig) {
  remove_temps();
  write_stderr("mtp-harness: fatal signal ");
  char num[4] = {static_cast<char>('0' + sig / 10 % 10), static_cast<char>('0' + sig % 10), '\n',
                 '\0'};
  write_stderr(sig < 10 ? num + 1 : num);
  write_stderr("mtp-harness: backtrace (binary(+offset) [address]):\n");
  void* frames[64];
  ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), STDERR_FILENO);
  ::raise(sig);
}

/// 12 random hex digits.
std::string random_suffix() {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:012x}", r & 0xffffffffffffULL);
}

[[noreturn]] void fail(const std::string& final_path, const std::string& what, int err) {
  throw InfraError(fmt::format("{}: {}: {}", final_path, what, std::strerror(err)));
}

}  // namespace

ChildProcessGuard::ChildProcessGuard(pid_t pid) {
  for (int i = 0; i < static_cast<int>(std::size(g_children)); ++i) {
    pid_t expected = 0;
    if (g_children[i].compare_exchange_strong(expected, pid)) {
      slot_ = i;
      return;
    }
  }
  MTP_INTERNAL_ASSERT(false, "more than 8 child processes at once");
}

ChildProcessGuard::~ChildProcessGuard() {
  if (slot_ >= 0) g_children[slot_].store(0, std::memory_order_release);
}

std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

TempFile::TempFile(std::string final_path)
    : final_path_(std::move(final_path)),
      path_(
          fmt::format("{}.tmp-{}-{}", final_path_, static_cast<long>(::getpid()), random_suffix())),
      slot_(register_temp(path_)) {}

TempFile::~TempFile() { remove(); }

int TempFile::open_exclusive() {
  MTP_INTERNAL_ASSERT(slot_ >= 0 && !created_, "temporary created twice");
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    create_error_ = errno;
    remove();  // unregisters: what is under that name is not ours
    fail(final_path_, fmt::format("cannot create the temporary '{}'", path_), create_error_);
  }
  created_ = true;
  return fd;
}

void TempFile::created() {
  MTP_INTERNAL_ASSERT(slot_ >= 0 && !created_, "temporary created twice");
  created_ = true;
}

void TempFile::commit() {
  MTP_INTERNAL_ASSERT(slot_ >= 0 && created_, "commit of a temporary that was not created");
  auto failed = [&](const std::string& what) {
    const int err = errno;
    remove();
    fail(final_path_, what, err);
  };
  const int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) failed(fmt::format("cannot reopen '{}' to sync it", path_));
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    failed(fmt::format("cannot sync '{}'", path_));
  }
  ::close(fd);
  if (::rename(path_.c_str(), final_path_.c_str()) != 0) {
    failed(fmt::format("cannot rename '{}' to the final name", path_));
  }
  created_ = false;  // it is the final file now
  unregister_temp(slot_);
  slot_ = -1;
  // The rename itself reaches the disk with the directory (file systems that cannot sync a
  // directory say EINVAL; the file's own data is synced already).
  const std::string dir = parent_directory(final_path_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    const int rc = ::fsync(dfd);
    const int err = errno;
    ::close(dfd);
    if (rc != 0 && err != EINVAL) {
      ::unlink(final_path_.c_str());
      fail(final_path_, fmt::format("cannot sync directory '{}'", dir), err);
    }
  }
}

void TempFile::remove() noexcept {
  if (created_) ::unlink(path_.c_str());
  created_ = false;
  if (slot_ >= 0) unregister_temp(slot_);
  slot_ = -1;
}

void install_signal_cleanup() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, sig);
  sa.sa_handler = remove_temps_and_exit;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  void* warm[1];
  ::backtrace(warm, 1);  // loads libgcc's unwinder now: a crash handler cannot load it
  // A file past ulimit -f: write() fails with EFBIG, which the writers report (InfraError,
  // temporaries removed), instead of the default SIGXFSZ that kills the process silently.
  ::signal(SIGXFSZ, SIG_IGN);
  // The crash handler runs on a stack of its own: a stack overflow (deep recursion on hostile
  // input) must still print its message and remove the temporaries.
  static char alt_stack[1 << 16];
  stack_t ss;
  std::memset(&ss, 0, sizeof ss);
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);
  sa.sa_handler = remove_temps_and_reraise;
  sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::sigaction(sig, &sa, nullptr);
}

TempDirectory::TempDirectory(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = fmt::format("{}/{}-XXXXXX", base && *base ? base : "/tmp", prefix);
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw InfraError(
        fmt::format("cannot create a temporary directory {}: {}", tmpl, std::strerror(errno)));
  }
  path_ = tmpl;
  slot_ = register_temp(path_, kDirectorySlot);  // a signal removes it with its content too
}

TempDirectory::~TempDirectory() {
  remove_tree(path_);
  unregister_temp(slot_);
}

namespace {

/// nftw callback: directories after their contents (FTW_DEPTH), links as links (FTW_PHYS).
int remove_entry(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_DP) {
    ::rmdir(path);
  } else {
    ::unlink(path);
  }
  return 0;  // carry on: remove what can be removed
}

}  // namespace

void remove_tree(const std::string& path) noexcept {
  ::nftw(path.c_str(), remove_entry, 32, FTW_DEPTH | FTW_PHYS);
}

}  // namespace mtp
