#include <fmt/format.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <tuple>

#include "harness/common/error.h"
#include "harness/transport/transport.h"

namespace mtp::transport {

bool MessageTag::operator<(const MessageTag& o) const {
  return std::tie(kind, stage, microbatch, op, group, sequence, part) <
         std::tie(o.kind, o.stage, o.microbatch, o.op, o.group, o.sequence, o.part);
}

bool MessageTag::operator==(const MessageTag& o) const {
  return std::tie(kind, stage, microbatch, op, group, sequence, part) ==
         std::tie(o.kind, o.stage, o.microbatch, o.op, o.group, o.sequence, o.part);
}

std::string MessageTag::str() const {
  if (kind == Kind::kCollective) {
    static const char* const kOps[] = {"none",           "point-to-point message",
                                       "reduce_scatter", "all_gather",
                                       "broadcast",      "gather",
                                       "all_to_all"};
    const int i = static_cast<int>(op);
    const char* name = i >= 0 && i < 7 ? kOps[i] : "unknown collective";
    if (op == CollectiveOp::kPointToPoint) return fmt::format("{} #{}", name, sequence);
    return fmt::format("{} #{} of group {:016x} (part {})", name, sequence, group, part);
  }
  return fmt::format("{} from stage {}, microbatch {}",
                     kind == Kind::kActivation ? "activation" : "gradient", stage, microbatch);
}

namespace {

using Clock = std::chrono::steady_clock;

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

class InProcessTransport final : public Transport {
 public:
  InProcessTransport(int world_size, InProcessOptions options)
      : world_size_(world_size),
        options_(options),
        activity_(world_size, "not started"),
        rng_(options.delay_seed) {}

  int world_size() const override { return world_size_; }

  void send(int src, int dst, const MessageTag& tag, const at::Tensor& t) override {
    check_rank(src, "send source");
    check_rank(dst, "send destination");
    Message m{t.detach().contiguous().clone(), Clock::now()};
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.max_delay_us > 0) {
      std::uniform_int_distribution<int64_t> d(0, options_.max_delay_us);
      m.visible_at += std::chrono::microseconds(d(rng_));
    }
    auto key = std::make_tuple(src, dst, tag);
    MTP_INTERNAL_ASSERT(mailbox_.count(key) == 0,
                        fmt::format("rank {} sent {} to rank {} twice", src, tag.str(), dst));
    mailbox_.emplace(key, std::move(m));
    cv_.notify_all();
  }

  at::Tensor recv(int dst, int src, const MessageTag& tag,
                  const std::vector<int64_t>& expected_shape) override {
    check_rank(src, "recv source");
    check_rank(dst, "recv destination");
    auto key = std::make_tuple(src, dst, tag);
    const auto deadline = Clock::now() + options_.timeout;
    std::unique_lock<std::mutex> lock(mu_);
    const std::string before = activity_[dst];
    activity_[dst] = fmt::format("{}; waiting to receive {} from rank {}", before, tag.str(), src);
    while (true) {
      if (!abort_reason_.empty()) {
        throw TransportAborted(fmt::format("rank {}: receive of {} from rank {} aborted: {}", dst,
                                           tag.str(), src, abort_reason_));
      }
      auto it = mailbox_.find(key);
      const auto now = Clock::now();
      if (it != mailbox_.end() && it->second.visible_at <= now) {
        at::Tensor t = std::move(it->second.tensor);
        mailbox_.erase(it);
        activity_[dst] = before;
        if (t.sizes().vec() != expected_shape) {
          throw InfraError(fmt::format(
              "rank {}: {} from rank {} has shape {}, the p2p shape table expects {}", dst,
              tag.str(), src, shape_str(t.sizes().vec()), shape_str(expected_shape)));
        }
        return t;
      }
      if (now >= deadline) throw InfraError(timeout_report(dst, src, tag));
      auto wake = deadline;
      if (it != mailbox_.end()) wake = std::min(wake, it->second.visible_at);
      cv_.wait_until(lock, wake);
    }
  }

  void note(int rank, const std::string& activity) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (rank >= 0 && rank < world_size_) activity_[rank] = activity;
  }

  void abort(const std::string& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_reason_.empty()) abort_reason_ = why;
    cv_.notify_all();
  }

 private:
  struct Message {
    at::Tensor tensor;
    Clock::time_point visible_at;
  };

  void check_rank(int r, const char* what) const {
    MTP_INTERNAL_ASSERT(r >= 0 && r < world_size_, fmt::format("{} rank {} out of range", what, r));
  }

  // Called with mu_ held.
  std::string timeout_report(int dst, int src, const MessageTag& tag) const {
    std::string msg = fmt::format(
        "rank {}: timed out after {} ms waiting to receive {} from rank {}\npending operations:",
        dst, options_.timeout.count(), tag.str(), src);
    for (int r = 0; r < world_size_; ++r) msg += fmt::format("\n  rank {}: {}", r, activity_[r]);
    msg += "\nundelivered messages:";
    if (mailbox_.empty()) msg += " none";
    for (const auto& [k, m] : mailbox_) {
      msg += fmt::format("\n  rank {} -> rank {}: {}", std::get<0>(k), std::get<1>(k),
                         std::get<2>(k).str());
    }
    return msg;
  }

  const int world_size_;
  const InProcessOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, MessageTag>, Message> mailbox_;
  std::vector<std::string> activity_;
  std::string abort_reason_;
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Transport> make_in_process_transport(int world_size, InProcessOptions options) {
  MTP_INTERNAL_ASSERT(world_size >= 1, "world size must be >= 1");
  return std::make_unique<InProcessTransport>(world_size, options);
}

}  // namespace mtp::transport
