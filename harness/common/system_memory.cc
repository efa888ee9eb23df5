#include "harness/common/system_memory.h"

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

}  // namespace

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
  return avail;
}

}  // namespace mtp
