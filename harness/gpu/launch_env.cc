#include <fmt/format.h>

#include <cstdlib>

#include "harness/common/error.h"
#include "harness/gpu/gpu.h"

namespace mtp::gpu {
namespace {

/// The first of `names` that is set, parsed as an int in [lo, hi]; `fallback` when none is set
/// and a fallback exists, else InputError.
int env_int(std::initializer_list<const char*> names, int lo, int hi, const int* fallback) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v == nullptr) continue;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < lo || x > hi) {
      throw InputError(fmt::format("launcher: {}={} is not an integer in [{}, {}]", n, v, lo, hi));
    }
    return static_cast<int>(x);
  }
  if (fallback) return *fallback;
  throw InputError(
      fmt::format("launcher: none of {} is set (start with torchrun or mpirun, or "
                  "leave --launcher out to run every rank in this process)",
                  fmt::join(names, ", ")));
}

}  // namespace

LaunchEnv launch_env_from_environment(const std::string& launcher) {
  LaunchEnv e;
  const int default_port = 29500;
  if (launcher == "env") {
    e.world_size = env_int({"WORLD_SIZE"}, 1, 1 << 20, nullptr);
    e.rank = env_int({"RANK"}, 0, e.world_size - 1, nullptr);
    e.local_rank = env_int({"LOCAL_RANK"}, 0, 1 << 20, nullptr);
    const char* addr = std::getenv("MASTER_ADDR");
    if (addr == nullptr || *addr == '\0') throw InputError("launcher: MASTER_ADDR is not set");
    e.master_addr = addr;
    e.master_port = env_int({"MASTER_PORT"}, 1, 65535, nullptr);
  } else if (launcher == "mpi") {
    e.world_size = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1, 1 << 20, nullptr);
    e.rank = env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK"}, 0, e.world_size - 1, nullptr);
    const int zero = 0;
    e.local_rank = env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}, 0, 1 << 20, &zero);
    if (const char* addr = std::getenv("MASTER_ADDR")) e.master_addr = addr;
    e.master_port = env_int({"MASTER_PORT"}, 1, 65535, &default_port);
  } else {
    throw InputError(
        fmt::format("--launcher {}: accepted \"env\" (torchrun) and \"mpi\" (mpirun)", launcher));
  }
  return e;
}

}  // namespace mtp::gpu
