// File: harness/common/system_memory.h
//
// How much memory this process may still allocate, for refusing inputs that declare absurd
// sizes (a record dataset of 2^40 elements) with a clear error instead of std::bad_alloc.
#pragma once

#include <cstdint>

namespace mtp {

/// Bytes of memory available to this process now: the smaller of the kernel's MemAvailable
/// (/proc/meminfo) and the room left under the cgroup v2 memory limit, when there is one.
/// Falls back to the free physical pages (sysconf) when /proc/meminfo cannot be read.
uint64_t available_memory_bytes();

}  // namespace mtp
