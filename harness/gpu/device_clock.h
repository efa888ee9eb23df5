// File: harness/gpu/device_clock.h
//
// DeviceClock: time stamps on a CUDA device's work queue, for per-op timing that does not stop
// the host (`mtp-harness calibrate --validate`). mark() records a CUDA event on the calling
// thread's current stream and returns its index; once the work is done, elapsed_ms(a, b) is the
// device time between marks a and b: the span from the moment the device reached mark a (the
// end of the work queued before it, or the moment it was queued when the device was idle) to the
// moment it reached mark b. Work of other threads queued on the same stream between the two marks
// is counted too, so callers that share a stream serialise what they bracket.
//
// Example:
//   DeviceClock clock(0);
//   const int a = clock.mark();
//   run_op();
//   const int b = clock.mark();
//   double ms = clock.elapsed_ms(a, b);   // waits for mark b
//   clock.clear();                        // reuse the events
#pragma once

#include <memory>

namespace mtp::gpu {

class DeviceClock {
 public:
  /// Events on CUDA `device`. Throws InputError in a build without CUDA LibTorch, InfraError
  /// when the CUDA runtime fails.
  explicit DeviceClock(int device);
  ~DeviceClock();
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;

  /// Records a time stamp on the calling thread's current stream of the device; its index.
  /// Thread-safe. Throws InfraError when CUDA fails.
  int mark();
  /// Milliseconds of device time from mark a to mark b (cudaEventElapsedTime, about 0.5 µs
  /// resolution); waits until mark b is reached. Throws InfraError when CUDA fails or an index
  /// is not a mark since the last clear().
  double elapsed_ms(int a, int b);
  /// Forgets every mark (the events are kept for reuse). Not while marks are being recorded.
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtp::gpu
