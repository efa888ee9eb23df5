// File: harness/gpu/side_stream.h
//
// The expert-parallel all-to-alls on a CUDA side stream, beside the compute (Megatron-LM
// combined_1f1b.py and fine_grained_callables.py: the communication stream next to the compute
// stream, with --overlap-moe-expert-parallel-comm). Ranks that are threads of one process share
// one CUDA device and its default stream, where all their compute runs; the side stream is one
// more stream of that device, also shared by every rank thread, so that a message one rank's
// move sends is read by another rank's move in the side stream's own order.
//
// The contract that keeps it race-free without tracking tensors:
//   - every move runs in an on_side_stream section, which is synchronous: when it returns, every
//     read and write it issued on the side stream has finished, so a tensor of the default
//     stream's memory pool that a section read may be freed and reused at once; its host copies
//     go through page-locked memory (side_copy), so that nothing in it waits for another stream;
//   - CUDA tensors a section returns were allocated from the side stream's pool (never from the
//     compute stream's, whose free blocks may still be read by compute queued after the fence):
//     they are marked as used by the default stream (record_stream), so the allocator does not
//     hand their memory to a later side-stream allocation before the compute that reads them
//     has run;
//   - a section first orders the side stream after the default stream's work: after the fence of
//     the side task that runs it (SideStreamFence, recorded by the rank thread before it issues
//     the paired compute node, so the move does not wait for that compute), else after
//     everything issued so far.
// Nothing here changes a value: the moves are copies, and which stream runs a copy does not
// change its bits. For a CPU device every entry point does nothing (on_side_stream just calls
// `work`), so CPU runs and their goldens are untouched.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>

namespace mtp::gpu {

/// The point of the rank's default stream that one side task (a combined 1F1B all-to-all node)
/// starts from. Made on the rank thread before it issues the paired compute node: records an
/// event on `device`'s current stream. For a CPU device it holds nothing. Throws InputError for
/// a CUDA device in a build without CUDA.
class SideStreamFence {
 public:
  explicit SideStreamFence(const at::Device& device);
  ~SideStreamFence();
  SideStreamFence(const SideStreamFence&) = delete;
  SideStreamFence& operator=(const SideStreamFence&) = delete;

  /// On the side thread, for the side task's duration: the side stream waits for the fence now,
  /// and on_side_stream sections on this thread wait for nothing more. With
  /// `side_stream_current` the side stream is also the thread's current stream (for a backward
  /// call: the autograd engine takes the caller's current stream as the producer of the root
  /// gradients, which the fence already covers). Restores the thread's state on destruction.
  class Scope {
   public:
    Scope(const SideStreamFence& fence, bool side_stream_current);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Runs `work` as a synchronous section on `device`'s side stream (see the file comment): the
/// side stream waits for the default stream's work (nothing when it is already current, the
/// fence inside a SideStreamFence::Scope, else everything issued so far), `work` runs with the
/// side stream current, the side stream is synchronised, and a CUDA tensor `work` returns is
/// marked as used by the device's default stream. For a CPU device: returns work(). Errors from
/// `work` propagate (the stream state is restored); CUDA failures throw InfraError.
at::Tensor on_side_stream(const at::Device& device, const std::function<at::Tensor()>& work);

/// Inside an on_side_stream section: `t` copied to `to` (the CPU or the section's CUDA device),
/// asynchronously on the side stream through page-locked host memory; the section's final
/// synchronisation completes it, so read the result after the section returns. A copy through
/// pageable host memory would not do: the CUDA driver may synchronise it with other streams
/// (measured on an H100: the section then waited for the compute stream). Returns `t` itself
/// when it is already on `to`; for the CPU: t.to(to).
at::Tensor side_copy(const at::Tensor& t, const at::Device& to);

}  // namespace mtp::gpu
