// GPU facts and device selection of a CUDA build (MTP_WITH_CUDA).
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include "harness/common/error.h"
#include "harness/gpu/gpu.h"

namespace mtp::gpu {

bool cuda_build() { return true; }

std::map<std::string, std::string> gpu_fingerprint(int device) {
  auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw InfraError(fmt::format("{}: {}", what, cudaGetErrorString(e)));
  };
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0, nccl = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  int cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
  cublasGetProperty(MAJOR_VERSION, &cublas_major);
  cublasGetProperty(MINOR_VERSION, &cublas_minor);
  cublasGetProperty(PATCH_LEVEL, &cublas_patch);
  ncclGetVersion(&nccl);
  auto cuda_version = [](int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); };
  return {
      {"gpu_name", prop.name},
      {"gpu_sm_count", std::to_string(prop.multiProcessorCount)},
      {"gpu_compute_capability", fmt::format("{}.{}", prop.major, prop.minor)},
      {"cuda_driver", cuda_version(driver)},
      {"cuda_runtime", cuda_version(runtime)},
      {"cublas_version", fmt::format("{}.{}.{}", cublas_major, cublas_minor, cublas_patch)},
      {"nccl_version", fmt::format("{}.{}.{}", nccl / 10000, (nccl / 100) % 100, nccl % 100)},
  };
}

AllocatorBytes allocator_bytes(int device) {
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  // Index 0: the aggregate over the small and large pools (StatType::AGGREGATE).
  return {static_cast<int64_t>(stats.allocated_bytes[0].current),
          static_cast<int64_t>(stats.reserved_bytes[0].current)};
}

void release_cached_memory(int device) {
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    (void)cudaGetLastError();
    throw InfraError(fmt::format("release_cached_memory: cudaDeviceSynchronize on device {}: {}",
                                 device, cudaGetErrorString(e)));
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
}

uint64_t device_free_memory_bytes(int device) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) throw InfraError("cudaGetDevice failed");
  size_t free_bytes = 0, total = 0;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMemGetInfo(&free_bytes, &total);
  cudaSetDevice(previous);
  if (e != cudaSuccess) {
    throw InfraError(fmt::format("cudaMemGetInfo on device {}: {}", device, cudaGetErrorString(e)));
  }
  return free_bytes;
}

void set_current_device(int device) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
}

}  // namespace mtp::gpu
