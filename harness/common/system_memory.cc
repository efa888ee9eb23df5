#include "harness/common/system_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>

namespace mtp {
namespace {

/// The first number in file `path`, or nullopt (missing file, "max", no number).
std::optional<uint64_t> read_number(const char* path) {
  std::ifstream in(path);
  uint64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

std::optional<uint64_t> meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

/// The value of "<key>:" (in kB) in /proc/self/status, in bytes.
std::optional<uint64_t> self_status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string k, unit;
  uint64_t kib = 0;
  while (in >> k) {
    if (k == key + ":" && in >> kib) return kib * 1024;
    std::getline(in, unit);
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> process_limit_room_bytes() {
  std::optional<uint64_t> room;
  auto bound = [&](int resource, const char* usage_key) {
    struct rlimit rl;
    if (::getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
    const uint64_t used = self_status_bytes(usage_key).value_or(0);
    const uint64_t left = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
    room = room ? std::min(*room, left) : left;
  };
  bound(RLIMIT_AS, "VmSize");    // ulimit -v: the address space, mappings included
  bound(RLIMIT_DATA, "VmData");  // ulimit -d: the data segment and private mappings
  return room;
}

uint64_t available_memory_bytes() {
  uint64_t avail = 0;
  if (auto m = meminfo_available()) {
    avail = *m;
  } else {
    const long pages = ::sysconf(_SC_AVPHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    avail = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  }
  const auto limit = read_number("/sys/fs/cgroup/memory.max");
  const auto used = read_number("/sys/fs/cgroup/memory.current");
  if (limit && used) avail = std::min(avail, *limit > *used ? *limit - *used : 0);
  if (const auto room = process_limit_room_bytes()) avail = std::min(avail, *room);
  return avail;
}

}  // namespace mtp
