// NCCL point-to-point transport, one process per pipeline rank (gpu.h).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "harness/common/error.h"
#include "harness/gpu/gpu.h"

namespace mtp::gpu {
namespace {

using transport::MessageTag;
using Clock = std::chrono::steady_clock;

// kind, stage, microbatch, op, group, sequence, part, dtype, ndim, d0, d1, d2, d3
constexpr int kHeader = 13;
constexpr int kMaxDims = 4;

ncclDataType_t nccl_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kLong:
      return ncclInt64;
    case at::kInt:
      return ncclInt32;
    case at::kByte:
      return ncclUint8;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kHalf:
      return ncclFloat16;
    default:
      throw InternalError(fmt::format("NCCL transport: unsupported dtype {}", c10::toString(t)));
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

/// One direction of traffic between two ranks: a two-rank communicator (the sender is its rank
/// 0) and a stream on this process's device.
struct Channel {
  ncclComm_t comm = nullptr;
  c10::cuda::CUDAStream stream;
  int peer_in_comm = 0;  // the other end's rank in `comm`
  /// Held by the one thread that reads the channel's next message (header, then payload). Two
  /// threads of one rank may receive from one peer at once (the rank's and the combined 1F1B
  /// side thread's expert all-to-all): a header receive posted between another thread's header
  /// and payload receives would take that payload's bytes.
  std::shared_ptr<std::timed_mutex> reader = std::make_shared<std::timed_mutex>();
};

class NcclTransport final : public transport::Transport {
 public:
  NcclTransport(const LaunchEnv& env, int device, std::chrono::milliseconds timeout)
      : env_(env),
        device_(static_cast<c10::DeviceIndex>(device)),
        timeout_(timeout),
        activity_(env.world_size, "?") {
    // Deterministic NCCL settings, before any communicator exists.
    for (auto [k, v] : {std::pair{"NCCL_ALGO", "Ring"}, std::pair{"NCCL_NVLS_ENABLE", "0"}}) {
      const char* cur = std::getenv(k);
      if (cur != nullptr && std::string(cur) != v) {
        throw InputError(
            fmt::format("environment: {}={} conflicts with the deterministic {}={}", k, cur, k, v));
      }
      setenv(k, v, 1);
    }
    c10::cuda::CUDAGuard guard(device_);
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<uint16_t>(env.master_port);
    // Under torchrun the agent already serves a TCPStore at MASTER_ADDR:MASTER_PORT and tells the
    // workers to join it as clients (TORCHELASTIC_USE_AGENT_STORE=True).
    const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    const bool agent_store = agent != nullptr && std::string(agent) == "True";
    opts.isServer = env.rank == 0 && !agent_store;
    opts.numWorkers = static_cast<size_t>(env.world_size);
    opts.timeout = timeout;
    try {
      store_ = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
    } catch (const std::exception& e) {
      throw InfraError(fmt::format("rank {}: TCPStore rendezvous at {}:{} failed: {}", env.rank,
                                   env.master_addr, env.master_port, e.what()));
    }
    // Every directed pair (a -> b) this rank belongs to, in one global order.
    for (int a = 0; a < env.world_size; ++a) {
      for (int b = 0; b < env.world_size; ++b) {
        if (a == b || (a != env.rank && b != env.rank)) continue;
        const std::string key = fmt::format("mtp_nccl_id/{}->{}", a, b);
        ncclUniqueId id;
        if (env.rank == a) {
          nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", b, nullptr);
          store_->set(key, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id),
                                                reinterpret_cast<uint8_t*>(&id) + sizeof id));
        } else {
          auto bytes = store_->get(key);
          MTP_INTERNAL_ASSERT(bytes.size() == sizeof id, "bad NCCL unique id size");
          std::memcpy(&id, bytes.data(), sizeof id);
        }
        Channel ch{nullptr, c10::cuda::getStreamFromPool(false, device_), env.rank == a ? 1 : 0};
        const int my_rank_in_comm = env.rank == a ? 0 : 1;
        nccl_check(ncclCommInitRank(&ch.comm, 2, id, my_rank_in_comm), "ncclCommInitRank",
                   env.rank == a ? b : a, nullptr);
        channels_.emplace(std::make_pair(a, b), ch);
      }
    }
  }

  ~NcclTransport() override {
    for (auto& [k, ch] : channels_) {
      if (ch.comm != nullptr) ncclCommDestroy(ch.comm);
    }
  }

  int world_size() const override { return env_.world_size; }

  void send(int src, int dst, const MessageTag& tag, const at::Tensor& t) override {
    MTP_INTERNAL_ASSERT(src == env_.rank,
                        fmt::format("rank {} cannot send for rank {}", env_.rank, src));
    c10::cuda::CUDAGuard guard(device_);
    Channel& ch = channel(src, dst);
    // A copy, made on the current stream: the caller may overwrite `t` as soon as send returns
    // (the Transport contract), while NCCL reads the copy on the channel stream.
    at::Tensor payload = t.detach().contiguous().clone();
    MTP_INTERNAL_ASSERT(
        payload.is_cuda() && payload.dim() <= kMaxDims,
        fmt::format("NCCL transport sends CUDA tensors of at most {} dimensions", kMaxDims));
    int64_t h[kHeader] = {static_cast<int64_t>(tag.kind),
                          tag.stage,
                          tag.microbatch,
                          static_cast<int64_t>(tag.op),
                          static_cast<int64_t>(tag.group),
                          tag.sequence,
                          tag.part,
                          static_cast<int64_t>(payload.scalar_type()),
                          payload.dim(),
                          1,
                          1,
                          1,
                          1};
    for (int64_t i = 0; i < payload.dim(); ++i) h[9 + i] = payload.size(i);
    at::Tensor header = at::from_blob(h, {kHeader}, at::kLong).to(payload.device());
    // The channel stream waits for the work that produced the payload and the header.
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device_));
    ready.block(ch.stream);
    std::lock_guard<std::mutex> lock(mu_);
    activity_[src] = fmt::format("sending {} to rank {}", tag.str(), dst);
    nccl_check(ncclSend(header.data_ptr(), kHeader, ncclInt64, ch.peer_in_comm, ch.comm,
                        ch.stream.stream()),
               "ncclSend(header)", dst, &tag);
    nccl_check(ncclSend(payload.data_ptr(), payload.numel(), nccl_type(payload.scalar_type()),
                        ch.peer_in_comm, ch.comm, ch.stream.stream()),
               "ncclSend", dst, &tag);
    // Keep both buffers alive until the channel stream is done with them.
    c10::cuda::CUDACachingAllocator::recordStream(header.storage().data_ptr(), ch.stream);
    c10::cuda::CUDACachingAllocator::recordStream(payload.storage().data_ptr(), ch.stream);
  }

  at::Tensor recv(int dst, int src, const MessageTag& tag,
                  const std::vector<int64_t>& expected_shape) override {
    MTP_INTERNAL_ASSERT(dst == env_.rank,
                        fmt::format("rank {} cannot receive for rank {}", env_.rank, dst));
    c10::cuda::CUDAGuard guard(device_);
    const auto deadline = Clock::now() + timeout_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      activity_[dst] = fmt::format("waiting to receive {} from rank {}", tag.str(), src);
    }
    while (true) {
      // A message read ahead by another thread of this rank sits in the stash; else this thread
      // becomes the channel's reader, checking the stash while it waits for its turn.
      Channel& ch = channel(src, dst);
      std::unique_lock<std::timed_mutex> reading(*ch.reader, std::defer_lock);
      while (true) {
        if (auto t = take_stashed(ch, src, tag)) return finish(*t, dst, src, tag, expected_shape);
        if (reading.try_lock_for(std::chrono::microseconds(200))) break;
        if (Clock::now() >= deadline) time_out(dst, src, tag);
      }
      // The reader before this one may have stashed this message after the last check.
      if (auto t = take_stashed(ch, src, tag)) return finish(*t, dst, src, tag, expected_shape);
      // The next message on the channel: header, then payload.
      at::Tensor header =
          at::empty({kHeader}, at::TensorOptions().dtype(at::kLong).device(at::kCUDA, device_));
      {
        std::lock_guard<std::mutex> lock(mu_);
        nccl_check(ncclRecv(header.data_ptr(), kHeader, ncclInt64, ch.peer_in_comm, ch.comm,
                            ch.stream.stream()),
                   "ncclRecv(header)", src, &tag);
      }
      wait_stream(ch, deadline, dst, src, tag);
      at::Tensor h = header.cpu();
      const int64_t* hv = h.data_ptr<int64_t>();
      MessageTag got;
      got.kind = static_cast<MessageTag::Kind>(hv[0]);
      got.stage = static_cast<int>(hv[1]);
      got.microbatch = static_cast<int>(hv[2]);
      got.op = static_cast<transport::CollectiveOp>(hv[3]);
      got.group = static_cast<uint64_t>(hv[4]);
      got.sequence = hv[5];
      got.part = static_cast<int>(hv[6]);
      MTP_INTERNAL_ASSERT(hv[8] >= 0 && hv[8] <= kMaxDims,
                          fmt::format("rank {}: header from rank {} declares {} dimensions",
                                      env_.rank, src, hv[8]));
      std::vector<int64_t> shape(hv + 9, hv + 9 + hv[8]);
      at::Tensor payload = at::empty(
          shape,
          at::TensorOptions().dtype(static_cast<at::ScalarType>(hv[7])).device(at::kCUDA, device_));
      {
        std::lock_guard<std::mutex> lock(mu_);
        nccl_check(ncclRecv(payload.data_ptr(), payload.numel(), nccl_type(payload.scalar_type()),
                            ch.peer_in_comm, ch.comm, ch.stream.stream()),
                   "ncclRecv", src, &got);
      }
      c10::cuda::CUDACachingAllocator::recordStream(payload.storage().data_ptr(), ch.stream);
      // The compute stream waits for the payload.
      at::cuda::CUDAEvent done;
      done.record(ch.stream);
      done.block(c10::cuda::getCurrentCUDAStream(device_));
      if (got == tag) return finish(payload, dst, src, tag, expected_shape);
      std::lock_guard<std::mutex> lock(mu_);
      stash_[{src, got}] = payload;  // arrived ahead of its receive
    }
  }

  void note(int rank, const std::string& activity) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (rank >= 0 && rank < env_.world_size) activity_[rank] = activity;
  }

  void abort(const std::string& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    abort_reason_ = why;
    for (auto& [k, ch] : channels_) {
      if (ch.comm != nullptr) ncclCommAbort(ch.comm);
      ch.comm = nullptr;
    }
  }

 private:
  Channel& channel(int a, int b) {
    auto it = channels_.find({a, b});
    MTP_INTERNAL_ASSERT(it != channels_.end(), fmt::format("no NCCL channel {} -> {}", a, b));
    if (it->second.comm == nullptr) {
      throw transport::TransportAborted(fmt::format(
          "rank {}: NCCL channel {} -> {} was aborted: {}", env_.rank, a, b, abort_reason_));
    }
    return it->second;
  }

  at::Tensor finish(const at::Tensor& t, int dst, int src, const MessageTag& tag,
                    const std::vector<int64_t>& expected) {
    if (t.sizes().vec() != expected) {
      throw InfraError(
          fmt::format("rank {}: {} from rank {} has shape {}, the p2p shape table expects {}", dst,
                      tag.str(), src, shape_str(t.sizes().vec()), shape_str(expected)));
    }
    std::lock_guard<std::mutex> lock(mu_);
    activity_[dst] = "computing";
    return t;
  }

  // Polls the channel stream until its work is done, NCCL reports an error, or the deadline.
  void wait_stream(Channel& ch, Clock::time_point deadline, int me, int peer,
                   const MessageTag& tag) {
    while (true) {
      const cudaError_t q = cudaStreamQuery(ch.stream.stream());
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) {
        throw InfraError(fmt::format("rank {}: CUDA error while receiving {} from rank {}: {}", me,
                                     tag.str(), peer, cudaGetErrorString(q)));
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(ch.comm, &async);
      if (async != ncclSuccess) nccl_check(async, "NCCL async error", peer, &tag);
      if (Clock::now() >= deadline) time_out(me, peer, tag);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  /// The message `tag` from `peer`, when another thread of this rank read it ahead; removed.
  /// The reader made its own current stream wait for the payload, this thread's may be another
  /// (the side stream): it waits for `ch`'s stream too, and the allocator learns the use.
  std::optional<at::Tensor> take_stashed(Channel& ch, int peer, const MessageTag& tag) {
    at::Tensor t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = stash_.find({peer, tag});
      if (it == stash_.end()) return std::nullopt;
      t = it->second;
      stash_.erase(it);
    }
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_);
    at::cuda::CUDAEvent arrived;
    arrived.record(ch.stream);
    arrived.block(current);
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), current);
    return t;
  }

  /// Aborts every channel and throws InfraError: `me` waited past the receive timeout for `tag`
  /// from `peer`; the message lists what each of this process's ranks was doing.
  [[noreturn]] void time_out(int me, int peer, const MessageTag& tag) {
    std::string msg = fmt::format(
        "rank {}: timed out after {} ms waiting to receive {} from rank {} (NCCL)\npending "
        "operations:",
        me, timeout_.count(), tag.str(), peer);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int r = 0; r < env_.world_size; ++r)
        msg += fmt::format("\n  rank {}: {}", r, activity_[r]);
    }
    msg += "\n(only this process's ranks are known here; the peers' state is in their own logs)";
    abort(msg);
    throw InfraError(msg);
  }

  void nccl_check(ncclResult_t r, const char* op, int peer, const MessageTag* tag) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    throw InfraError(fmt::format("rank {}: {} with peer rank {}{} failed: {} ({})", env_.rank, op,
                                 peer, tag ? " for " + tag->str() : std::string(),
                                 ncclGetErrorString(r), ncclGetLastError(nullptr)));
  }

  const LaunchEnv env_;
  const c10::DeviceIndex device_;
  const std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::map<std::pair<int, int>, Channel> channels_;
  std::map<std::pair<int, MessageTag>, at::Tensor> stash_;
  std::vector<std::string> activity_;
  std::string abort_reason_;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<transport::Transport> make_nccl_transport(const LaunchEnv& env, int device,
                                                          std::chrono::milliseconds timeout) {
  return std::make_unique<NcclTransport>(env, device, timeout);
}

}  // namespace mtp::gpu
