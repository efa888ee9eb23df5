// File: harness/transport/transport.h
//
// Point-to-point tensor transport between pipeline ranks. The executor sends activations
// forward and gradients backward with tagged messages; sends never block (the message is copied
// before send() returns), receives block until the tagged message arrives or the timeout passes.
// Implementations: the in-process transport (ranks as threads of one process, any device) and
// the NCCL transport (harness/gpu: one process or thread per GPU). Collectives are built on top
// of send/recv in harness/collectives.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/common/error.h"

namespace mtp::transport {

/// The collective operation a kCollective message belongs to (harness/collectives).
enum class CollectiveOp : int {
  kNone = 0,
  kPointToPoint,   ///< a send/recv between two ranks outside any group collective
  kReduceScatter,  ///< a shard sent to the member that reduces it
  kAllGather,      ///< a reduced shard sent to every other member
  kBroadcast,      ///< the root's tensor
  kGather,         ///< a member's tensor sent to the root
  kAllToAll,       ///< a member's part for one other member
};

/// What a message carries. kActivation / kGradient: the forward activation or the backward
/// gradient leaving pipeline stage `stage` (string-order stage index) for microbatch
/// `microbatch`. kCollective: one message of collective `op` in group `group` (a stable id of the
/// group's ranks), the `sequence`-th collective every member of that group runs (for
/// kPointToPoint: the sequence number of the pair's messages), `part` = the shard or member index.
/// Every field takes part in matching; a (src, dst, tag) is sent at most once.
struct MessageTag {
  enum class Kind : int { kActivation, kGradient, kCollective };
  Kind kind = Kind::kActivation;
  int stage = 0;
  int microbatch = 0;
  CollectiveOp op = CollectiveOp::kNone;
  uint64_t group = 0;
  int64_t sequence = 0;
  int part = 0;

  /// A kCollective tag.
  static MessageTag collective(CollectiveOp op, uint64_t group, int64_t sequence, int part) {
    MessageTag t;
    t.kind = Kind::kCollective;
    t.op = op;
    t.group = group;
    t.sequence = sequence;
    t.part = part;
    return t;
  }
  bool operator<(const MessageTag& o) const;
  bool operator==(const MessageTag& o) const;
  /// "activation from stage 3, microbatch 5", "all_gather #4 of group 9f3a… (part 1)".
  std::string str() const;
};

/// Thrown by a receive that was woken by Transport::abort: another rank failed first, so this
/// error is a consequence, not the cause (the executor reports the cause).
class TransportAborted : public InfraError {
 public:
  explicit TransportAborted(const std::string& msg) : InfraError(msg) {}
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int world_size() const = 0;
  /// Sends a copy of `t` (detached, contiguous) from rank `src` to rank `dst`. Never blocks.
  virtual void send(int src, int dst, const MessageTag& tag, const at::Tensor& t) = 0;
  /// Receives on rank `dst` the message `tag` from `src`. Blocks until it arrives. Throws
  /// InfraError when it does not arrive within the timeout (the message lists every rank's
  /// pending operation and every undelivered message) or when the tensor's shape differs from
  /// `expected_shape` (the static p2p shape table); TransportAborted when the transport was
  /// aborted.
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
  /// Wakes every blocked receive with a TransportAborted that quotes `why` (a rank failed).
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
