// File: harness/gpu/gpu.h
//
// What the harness needs from a GPU build: the device fingerprint for records, the launcher
// environment of one-process-per-rank runs (torchrun or mpirun), and the NCCL transport.
// In a build without CUDA LibTorch every function that needs a GPU throws InputError saying so;
// launch_env_from_environment works everywhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "harness/transport/transport.h"

namespace mtp::gpu {

/// True when this binary was built against a CUDA LibTorch with NCCL (MTP_WITH_CUDA).
bool cuda_build();

/// GPU facts for the record: gpu_name, gpu_sm_count, gpu_compute_capability, cuda_driver,
/// cuda_runtime, cublas_version, nccl_version. Throws InputError without CUDA, InfraError when
/// the CUDA runtime fails.
std::map<std::string, std::string> gpu_fingerprint(int device);

/// Free bytes of CUDA `device` now (cudaMemGetInfo). Throws InputError without CUDA, InfraError
/// when the CUDA runtime fails.
uint64_t device_free_memory_bytes(int device);

/// Bytes held by LibTorch's CUDA caching allocator on `device`: allocated (live tensors) and
/// reserved (taken from the device: live tensors plus cached free blocks, CUDA graph memory
/// pools included). Throws InputError without CUDA.
struct AllocatorBytes {
  int64_t allocated = 0;
  int64_t reserved = 0;
};
AllocatorBytes allocator_bytes(int device);

/// Gives every cached free block of LibTorch's CUDA caching allocator back to the device
/// (emptyCache), the memory pools of destroyed CUDA graphs included. LibTorch frees a destroyed
/// graph's pool only under memory pressure and only while no capture is underway in the
/// process: where rank threads capture while others allocate, that moment may never come and
/// the freed pools of earlier graphs fill the device (2026-12-07, H100: 42 GiB after four
/// benchmark repetitions of the small model's pipelined graphs). Call where no thread of this
/// process captures (e.g. after a run's threads have joined). Throws InputError without CUDA.
void release_cached_memory(int device);

/// Makes `device` the calling thread's current CUDA device.
void set_current_device(int device);

/// One process of a multi-process launch. torchrun / torch.distributed.run ("env"): RANK,
/// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT. mpirun ("mpi"): OMPI_COMM_WORLD_RANK /
/// PMI_RANK, OMPI_COMM_WORLD_SIZE / PMI_SIZE, OMPI_COMM_WORLD_LOCAL_RANK / MPI_LOCALRANKID,
/// with MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default 29500).
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

/// Reads the launcher's variables. Throws InputError naming the variable that is missing or
/// malformed, or an unknown launcher.
LaunchEnv launch_env_from_environment(const std::string& launcher);

/// NCCL point-to-point transport of one process holding pipeline rank env.rank on `device`.
/// Rendezvous through LibTorch's c10d TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 serves); one
/// two-rank communicator and one CUDA stream per directed pair of ranks, created in a fixed
/// global order; every message is a header (tag, dtype, shape) then the payload, so receives
/// match by tag. Sends are ordered after the current stream's work with events; receives make
/// the current stream wait for them. NCCL_ALGO=Ring and NCCL_NVLS_ENABLE=0 are set before any
/// communicator exists. Errors and receive timeouts name rank, peer, tag and the pending op.
std::unique_ptr<transport::Transport> make_nccl_transport(const LaunchEnv& env, int device,
                                                          std::chrono::milliseconds timeout);

}  // namespace mtp::gpu
