// File: harness/common/system_memory.h
//
// How much memory this process may still allocate, for refusing inputs that declare absurd
// sizes (a record dataset of 2^40 elements) with a clear error instead of std::bad_alloc.
#pragma once

#include <cstdint>
#include <optional>

namespace mtp {

/// Bytes of memory available to this process now: the smallest of the kernel's MemAvailable
/// (/proc/meminfo), the room left under the cgroup v2 memory limit, when there is one, and the
/// room left under the process limits (process_limit_room_bytes). Falls back to the free
/// physical pages (sysconf) when /proc/meminfo cannot be read.
uint64_t available_memory_bytes();

/// The room left under this process's soft limits RLIMIT_AS (ulimit -v, against VmSize) and
/// RLIMIT_DATA (ulimit -d, against VmData) of /proc/self/status, in bytes; nullopt when neither
/// is set.
std::optional<uint64_t> process_limit_room_bytes();

}  // namespace mtp
