#include "harness/common/system_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace mtp {
namespace {

TEST(SystemMemoryTest, AvailableMemoryIsPositiveAndAtMostThePhysicalMemory) {
  const uint64_t avail = available_memory_bytes();
  const uint64_t physical = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                            static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_GT(avail, uint64_t{1} << 20);
  EXPECT_LE(avail, physical);
}

}  // namespace
}  // namespace mtp
