// File: kernels/cuda/cuda_check.h
//
// Host-side CUDA error handling for kernels/cuda: MTP_CUDA_CHECK(expr) throws mtp::kernels::cuda::
// CudaError with file:line, the expression and cudaGetErrorString's text when expr is not
// cudaSuccess. Device code never checks or throws.
//
// Example:
//   MTP_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream));
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace mtp::kernels::cuda {

/// CudaError: a CUDA runtime call failed; code() is the cudaError_t.
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

/// throw_cuda_error: builds and throws the CudaError for MTP_CUDA_CHECK.
[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* expr, const char* file,
                                          int line) {
  throw CudaError(code, std::string(file) + ":" + std::to_string(line) + ": " + expr +
                            " failed: " + cudaGetErrorName(code) + ": " + cudaGetErrorString(code));
}

}  // namespace mtp::kernels::cuda

#define MTP_CUDA_CHECK(expr)                                                                  \
  do {                                                                                        \
    const cudaError_t mtp_cuda_check_err_ = (expr);                                           \
    if (mtp_cuda_check_err_ != cudaSuccess) {                                                 \
      ::mtp::kernels::cuda::throw_cuda_error(mtp_cuda_check_err_, #expr, __FILE__, __LINE__); \
    }                                                                                         \
  } while (0)
