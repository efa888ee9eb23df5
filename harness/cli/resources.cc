// The resource check of check and run: refuse absurd variants before anything is allocated.
#include <fmt/format.h>

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>

#include "harness/cli/commands.h"
#include "harness/common/system_memory.h"
#include "harness/gpu/gpu.h"

namespace mtp::cli {

uint64_t free_disk_bytes(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir.empty() ? "." : dir, ec);
  while (!p.empty() && !std::filesystem::exists(p, ec)) {
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  const std::filesystem::space_info info = std::filesystem::space(p, ec);
  return ec ? 0 : static_cast<uint64_t>(info.available);
}

engine::ResourceEstimate require_variant_resources(const engine::RunPlan& plan,
                                                   const engine::Implementation& impl,
                                                   uint64_t max_memory, bool all_ranks_here,
                                                   int device_index, uint64_t& disk_budget,
                                                   const std::string& where) {
  const engine::ResourceEstimate est = engine::estimate_resources(plan, impl);
  uint64_t limit = max_memory;
  std::string name = "--max-memory";
  if (limit == 0 && plan.training.device == config::Device::kCpu) {
    limit = available_memory_bytes();
    name = "the CPU memory available (MemAvailable / cgroup limit / ulimit -v and -d)";
  } else if (limit == 0) {
    limit = gpu::device_free_memory_bytes(device_index);
    name = fmt::format("the free memory of cuda:{}", device_index);
  }
  engine::require_resources(est, all_ranks_here, limit, name, disk_budget, where);
  struct rlimit fsize;  // ulimit -f: a record past it would end in EFBIG half-written
  if (::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
      est.record_bytes > fsize.rlim_cur) {
    throw InputError(
        fmt::format("{}: its record needs about {} but this process may write files "
                    "of at most {} (ulimit -f): estimate {}",
                    where, engine::format_bytes(est.record_bytes),
                    engine::format_bytes(fsize.rlim_cur), est.describe()));
  }
  // What is left for the next variant's record (at least 1: 0 would mean "not checked").
  if (disk_budget > 0) disk_budget = std::max<uint64_t>(1, disk_budget - est.record_bytes);
  return est;
}

}  // namespace mtp::cli
