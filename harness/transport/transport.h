// File: harness/transport/transport.h
//
// Point-to-point tensor transport between pipeline ranks. The executor sends activations
// forward and gradients backward with tagged messages; sends never block (the message is copied
// before send() returns), receives block until the tagged message arrives or the timeout passes.
// Implementations: InProcessTransport (ranks as threads, CPU); an NCCL transport plugs into the
// same interface (issue 4).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/common/error.h"

namespace mtp::transport {

/// What a message carries: the forward activation or the backward gradient leaving pipeline
/// stage `stage` (string-order stage index) for microbatch `microbatch`.
struct MessageTag {
  /// kCollective: the trainer's messages between steps (grads to sum, weights and losses to
  /// record); `stage` is then a parameter index and `microbatch` step·16 + purpose.
  enum class Kind { kActivation, kGradient, kCollective };
  Kind kind = Kind::kActivation;
  int stage = 0;
  int microbatch = 0;
  bool operator<(const MessageTag& o) const;
  bool operator==(const MessageTag& o) const {
    return kind == o.kind && stage == o.stage && microbatch == o.microbatch;
  }
  /// "activation from stage 3, microbatch 5".
  std::string str() const;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int world_size() const = 0;
  /// Sends a copy of `t` (detached, contiguous) from rank `src` to rank `dst`. Never blocks.
  virtual void send(int src, int dst, const MessageTag& tag, const at::Tensor& t) = 0;
  /// Receives on rank `dst` the message `tag` from `src`. Blocks until it arrives. Throws
  /// InfraError when it does not arrive within the timeout (the message lists every rank's
  /// pending operation and every undelivered message), when the transport was aborted, or when
  /// the tensor's shape differs from `expected_shape` (the static p2p shape table).
  virtual at::Tensor recv(int dst, int src, const MessageTag& tag,
                          const std::vector<int64_t>& expected_shape) = 0;
  /// A receive posted ahead of its use (Megatron's overlap_p2p_comm: irecv now, wait later).
  struct PendingRecv {
    int dst = 0, src = 0;
    MessageTag tag;
    std::vector<int64_t> shape;
  };
  /// Posts a receive; the message is taken by wait(). The in-process transport buffers every
  /// message already, so posting records the request; an NCCL transport starts ncclRecv here.
  virtual PendingRecv irecv(int dst, int src, const MessageTag& tag,
                            const std::vector<int64_t>& expected_shape) {
    return {dst, src, tag, expected_shape};
  }
  /// Completes a posted receive (same errors as recv()).
  virtual at::Tensor wait(const PendingRecv& r) { return recv(r.dst, r.src, r.tag, r.shape); }
  /// Records what rank `rank` is doing now, for timeout reports ("F chunk 1 mb 3").
  virtual void note(int rank, const std::string& activity) = 0;
  /// Wakes every blocked receive with an InfraError that quotes `why` (a rank failed).
  virtual void abort(const std::string& why) = 0;
};

/// Options of the in-process transport.
struct InProcessOptions {
  std::chrono::milliseconds timeout{60000};  ///< receive timeout
  /// When > 0, each message becomes visible to its receiver only after a random delay in
  /// [0, max_delay_us] microseconds (seeded by delay_seed): results must not change.
  int64_t max_delay_us = 0;
  uint64_t delay_seed = 0;
};

/// Ranks as threads of one process: one mailbox per (src, dst, tag).
std::unique_ptr<Transport> make_in_process_transport(int world_size, InProcessOptions options);

}  // namespace mtp::transport
