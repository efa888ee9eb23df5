// File: kernels/internal/arg_checks.h
//
// Host-side argument checks shared by the CPU and CUDA entry points: each throws
// std::invalid_argument naming the function and the argument. Private to kernels/.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mtp::kernels::internal {

/// require_size: throws std::invalid_argument unless 0 ≤ value ≤ max.
inline void require_size(const char* fn, const char* name, int64_t value,
                         int64_t max = INT64_MAX) {
  if (value < 0 || value > max) {
    throw std::invalid_argument(std::string(fn) + ": " + name + " = " + std::to_string(value) +
                                " is outside [0, " + std::to_string(max) + "]");
  }
}

/// require_ptr: throws std::invalid_argument when `needed` and `p` is null.
inline void require_ptr(const char* fn, const char* name, const void* p, bool needed) {
  if (needed && p == nullptr) {
    throw std::invalid_argument(std::string(fn) + ": " + name + " is null");
  }
}

/// index_error: the std::out_of_range thrown for an id or label outside [0, limit).
inline std::out_of_range index_error(const char* fn, const char* what, int64_t position,
                                     int64_t value, int64_t limit) {
  return std::out_of_range(std::string(fn) + ": " + what + "[" + std::to_string(position) +
                           "] = " + std::to_string(value) + " is outside [0, " +
                           std::to_string(limit) + ")");
}

}  // namespace mtp::kernels::internal
