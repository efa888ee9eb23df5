#include "harness/engine/executor.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>

#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "harness/common/error.h"
#include "harness/engine/determinism.h"

namespace mtp::engine {
namespace {

using transport::MessageTag;
using Kind = MessageTag::Kind;

struct Stored {
  int microbatch;
  at::Tensor input;   // received activation (requires_grad) or undefined on stage 0
  at::Tensor output;  // activation sent, or the objective on the loss stage
};

void run_rank(int rank, const std::vector<std::unique_ptr<ModelChunk>>& chunks,
              const layout::PipelineLayout& layout, const std::vector<schedule::Op>& ops,
              const std::vector<MicrobatchTensors>& microbatches, transport::Transport& tr,
              StepLosses& losses, std::mutex& losses_mu) {
  pin_thread_determinism();
  const int P = layout.pipeline_size;
  const int last = layout.num_stages() - 1;
  std::vector<std::deque<Stored>> stored(layout.virtual_size);
  for (const auto& op : ops) {
    const int stage = op.chunk * P + rank;
    ModelChunk& chunk = *chunks[stage];
    const int mb = op.microbatch;
    if (op.type == schedule::OpType::kForward) {
      tr.note(rank, fmt::format("forward chunk {} (stage {}) microbatch {}", op.chunk, stage, mb));
      at::Tensor input;
      if (stage > 0) {
        input = tr.recv(rank, (stage - 1) % P, {Kind::kActivation, stage - 1, mb},
                        chunk.input_shape());
        input.requires_grad_(true);
      }
      ChunkOutput out = chunk.forward(input, microbatches[mb]);
      if (stage == last) {
        std::lock_guard<std::mutex> lock(losses_mu);
        losses.lm[mb] = out.lm;
        losses.mtp[mb] = out.mtp;
        stored[op.chunk].push_back({mb, input, out.objective});
      } else {
        tr.send(rank, (stage + 1) % P, {Kind::kActivation, stage, mb}, out.activation);
        stored[op.chunk].push_back({mb, input, out.activation});
      }
    } else {
      tr.note(rank, fmt::format("backward chunk {} (stage {}) microbatch {}", op.chunk, stage, mb));
      MTP_INTERNAL_ASSERT(!stored[op.chunk].empty() && stored[op.chunk].front().microbatch == mb,
                          fmt::format("rank {}: backward of chunk {} microbatch {} is not FIFO",
                                      rank, op.chunk, mb));
      Stored s = std::move(stored[op.chunk].front());
      stored[op.chunk].pop_front();
      if (stage == last) {
        torch::autograd::backward({s.output});
      } else {
        auto grad = tr.recv(rank, (stage + 1) % P, {Kind::kGradient, stage + 1, mb},
                            chunk.output_shape());
        torch::autograd::backward({s.output}, {grad});
      }
      if (stage > 0) {
        MTP_INTERNAL_ASSERT(s.input.grad().defined(),
                            fmt::format("stage {} produced no input gradient", stage));
        tr.send(rank, (stage - 1) % P, {Kind::kGradient, stage, mb}, s.input.grad());
      }
    }
  }
  tr.note(rank, "finished its schedule");
}

}  // namespace

StepLosses run_pipeline_step(const std::vector<std::unique_ptr<ModelChunk>>& chunks,
                             const layout::PipelineLayout& layout,
                             const schedule::ScheduleConfig& schedule,
                             const std::vector<MicrobatchTensors>& microbatches,
                             transport::Transport& transport) {
  const int P = layout.pipeline_size;
  const size_t M = microbatches.size();
  StepLosses losses;
  losses.lm.assign(M, 0.0);
  losses.mtp.assign(M, {});
  std::mutex losses_mu;
  std::vector<std::exception_ptr> errors(P);
  std::vector<std::string> error_text(P);
  auto body = [&](int rank) {
    try {
      auto ops = schedule::rank_ops(schedule, rank);
      run_rank(rank, chunks, layout, ops, microbatches, transport, losses, losses_mu);
    } catch (const std::exception& e) {
      errors[rank] = std::current_exception();
      error_text[rank] = e.what();
      transport.abort(fmt::format("rank {} failed: {}", rank, e.what()));
    } catch (...) {
      errors[rank] = std::current_exception();
      transport.abort(fmt::format("rank {} failed", rank));
    }
  };
  if (P == 1) {
    body(0);
  } else {
    std::vector<std::thread> threads;
    for (int r = 0; r < P; ++r) threads.emplace_back(body, r);
    for (auto& t : threads) t.join();
  }
  // Report the root cause: a rank that failed for its own reason beats one that was aborted.
  int first = -1;
  for (int r = 0; r < P; ++r) {
    if (!errors[r]) continue;
    const bool aborted = error_text[r].find("aborted: rank") != std::string::npos;
    if (first < 0 || (!aborted && error_text[first].find("aborted: rank") != std::string::npos)) {
      first = r;
    }
  }
  if (first >= 0) std::rethrow_exception(errors[first]);
  return losses;
}

}  // namespace mtp::engine
