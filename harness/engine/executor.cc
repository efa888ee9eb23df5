#include "harness/engine/executor.h"

#include <fmt/format.h>

#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "harness/common/error.h"
#include "harness/engine/determinism.h"

namespace mtp::engine {
namespace {

using schedule::Op;
using schedule::OpType;
using transport::MessageTag;
using Kind = MessageTag::Kind;

/// Executes one rank's op list for one step.
class RankExecutor {
 public:
  RankExecutor(int rank, const std::vector<std::unique_ptr<ModelChunk>>& chunks,
               const layout::PipelineLayout& layout, std::vector<Op> ops, bool split,
               const std::vector<MicrobatchTensors>& microbatches, transport::Transport& tr,
               const ExecutionOptions& options, StepLosses& losses, std::mutex& losses_mu)
      : rank_(rank), chunks_(chunks), layout_(layout), ops_(std::move(ops)), split_(split),
        microbatches_(microbatches), tr_(tr), options_(options), losses_(losses),
        losses_mu_(losses_mu), stored_(layout.virtual_size) {}

  void run() {
    pin_thread_determinism();
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (options_.overlap_p2p && j + 1 < ops_.size()) post(j + 1);
      const bool pair = split_ && ops_[j].phase == schedule::Phase::kSteady &&
                        ops_[j].type == OpType::kForward && j + 1 < ops_.size() &&
                        ops_[j + 1].type == OpType::kBackward;
      if (pair) {
        if (options_.overlap_p2p && j + 2 < ops_.size()) post(j + 2);
        combined(j, j + 1);
        ++j;
      } else if (ops_[j].type == OpType::kForward) {
        auto prog = begin_forward(j);
        prog->forward_all();
        finish_forward(ops_[j], std::move(prog));
      } else {
        auto s = begin_backward(j);
        s.prog->backward_all(s.grad);
        finish_backward(ops_[j], *s.prog);
      }
    }
    tr_.note(rank_, "finished its schedule");
  }

 private:
  struct Stored {
    int microbatch;
    std::unique_ptr<model::ChunkProgram> prog;
  };
  struct Backward {
    std::unique_ptr<model::ChunkProgram> prog;
    at::Tensor grad;  // received output grad; undefined on the loss stage
  };

  int stage(const Op& op) const { return op.chunk * layout_.pipeline_size + rank_; }
  int last_stage() const { return layout_.num_stages() - 1; }
  int rank_of(int stage) const { return stage % layout_.pipeline_size; }

  // The receive op j needs, if any: its input activation (forward, not stage 0) or its output
  // gradient (backward, not the loss stage).
  bool needs_recv(size_t j, transport::Transport::PendingRecv& r) const {
    const Op& op = ops_[j];
    const int s = stage(op);
    if (op.type == OpType::kForward) {
      if (s == 0) return false;
      r = {rank_, rank_of(s - 1), {Kind::kActivation, s - 1, op.microbatch},
           chunks_[s]->input_shape()};
    } else {
      if (s == last_stage()) return false;
      r = {rank_, rank_of(s + 1), {Kind::kGradient, s + 1, op.microbatch},
           chunks_[s]->output_shape()};
    }
    return true;
  }

  void post(size_t j) {
    transport::Transport::PendingRecv r;
    if (posted_.count(j) || !needs_recv(j, r)) return;
    posted_[j] = tr_.irecv(r.dst, r.src, r.tag, r.shape);
  }

  at::Tensor fetch(size_t j) {
    auto it = posted_.find(j);
    if (it != posted_.end()) {
      at::Tensor t = tr_.wait(it->second);
      posted_.erase(it);
      return t;
    }
    transport::Transport::PendingRecv r;
    if (!needs_recv(j, r)) return {};
    return tr_.recv(r.dst, r.src, r.tag, r.shape);
  }

  std::unique_ptr<model::ChunkProgram> begin_forward(size_t j) {
    const Op& op = ops_[j];
    tr_.note(rank_, fmt::format("forward chunk {} (stage {}) microbatch {}", op.chunk, stage(op),
                                op.microbatch));
    at::Tensor input = fetch(j);
    if (input.defined()) input.requires_grad_(true);
    return chunks_[stage(op)]->program(input, microbatches_[op.microbatch], split_);
  }

  void finish_forward(const Op& op, std::unique_ptr<model::ChunkProgram> prog) {
    const int s = stage(op);
    if (s == last_stage()) {
      std::lock_guard<std::mutex> lock(losses_mu_);
      losses_.lm[op.microbatch] = prog->lm;
      losses_.mtp[op.microbatch] = prog->mtp;
    } else {
      tr_.send(rank_, rank_of(s + 1), {Kind::kActivation, s, op.microbatch}, prog->result);
    }
    stored_[op.chunk].push_back({op.microbatch, std::move(prog)});
  }

  Backward begin_backward(size_t j) {
    const Op& op = ops_[j];
    tr_.note(rank_, fmt::format("backward chunk {} (stage {}) microbatch {}", op.chunk, stage(op),
                                op.microbatch));
    auto& q = stored_[op.chunk];
    MTP_INTERNAL_ASSERT(!q.empty() && q.front().microbatch == op.microbatch,
                        fmt::format("rank {}: backward of chunk {} microbatch {} is not FIFO",
                                    rank_, op.chunk, op.microbatch));
    Backward b{std::move(q.front().prog), {}};
    q.pop_front();
    b.grad = fetch(j);
    return b;
  }

  void finish_backward(const Op& op, const model::ChunkProgram& prog) {
    const int s = stage(op);
    if (s == 0) return;
    MTP_INTERNAL_ASSERT(prog.input.grad().defined(),
                        fmt::format("stage {} produced no input gradient", s));
    tr_.send(rank_, rank_of(s - 1), {Kind::kGradient, s, op.microbatch}, prog.input.grad());
  }

  // Node groups of a program: consecutive nodes of one layer form a group; every node outside a
  // layer (pre/post-processing) is a group of its own.
  static std::vector<std::vector<size_t>> groups(const model::ChunkProgram& p) {
    std::vector<std::vector<size_t>> g;
    for (size_t i = 0; i < p.size(); ++i) {
      const int layer = p.node(i).layer;
      if (!g.empty() && layer >= 0 && p.node(g.back().back()).layer == layer) {
        g.back().push_back(i);
      } else {
        g.push_back({i});
      }
    }
    return g;
  }

  // One combined 1F1B step: F = ops_[jf] (forward), B = ops_[jb] (backward), different
  // microbatches. F's groups run forward first to last while B's run backward last to first, in
  // lockstep; inside a pair of layers the nodes interleave in Megatron's sub-step order.
  void combined(size_t jf, size_t jb) {
    auto fprog = begin_forward(jf);
    Backward b = begin_backward(jb);
    tr_.note(rank_, fmt::format("combined step: forward chunk {} mb {} | backward chunk {} mb {}",
                                ops_[jf].chunk, ops_[jf].microbatch, ops_[jb].chunk,
                                ops_[jb].microbatch));
    model::ChunkProgram& f = *fprog;
    model::ChunkProgram& bp = *b.prog;
    const auto fg = groups(f);
    const auto bg = groups(bp);
    auto fwd = [&](size_t i) { f.forward_node(i); };
    auto bwd = [&](size_t i) { bp.backward_node(i, b.grad); };
    static const std::vector<std::pair<char, std::string>> kOrder = {
        {'B', "mtp_post"}, {'B', "combine"},  {'F', "attn"}, {'B', "mlp"},
        {'F', "dispatch"}, {'B', "dispatch"}, {'F', "mlp"},  {'F', "combine"},
        {'B', "attn"},     {'F', "mtp_post"}};
    const size_t steps = std::max(fg.size(), bg.size());
    for (size_t t = 0; t < steps; ++t) {
      const std::vector<size_t>* F = t < fg.size() ? &fg[t] : nullptr;
      const std::vector<size_t>* B = t < bg.size() ? &bg[bg.size() - 1 - t] : nullptr;
      std::vector<bool> fdone(F ? F->size() : 0, false), bdone(B ? B->size() : 0, false);
      auto run_named = [&](char side, const std::string& name) {
        const auto* g = side == 'F' ? F : B;
        if (g == nullptr) return;
        auto& done = side == 'F' ? fdone : bdone;
        const auto& prog = side == 'F' ? f : bp;
        // Forward takes its nodes in order, backward in reverse: only the next one may run.
        const size_t n = g->size();
        for (size_t k = 0; k < n; ++k) {
          const size_t idx = side == 'F' ? k : n - 1 - k;
          if (done[idx]) continue;
          if (prog.node((*g)[idx]).name == name) {
            side == 'F' ? fwd((*g)[idx]) : bwd((*g)[idx]);
            done[idx] = true;
          }
          return;
        }
      };
      if (F && B && f.node((*F)[0]).layer >= 0 && bp.node((*B)[0]).layer >= 0) {
        for (const auto& [side, name] : kOrder) run_named(side, name);
      }
      // Whatever the template did not cover (pre/post-processing, leftovers): B then F.
      for (size_t k = B ? B->size() : 0; k-- > 0;) {
        if (!bdone[k]) bwd((*B)[k]);
      }
      for (size_t k = 0; F && k < F->size(); ++k) {
        if (!fdone[k]) fwd((*F)[k]);
      }
    }
    finish_forward(ops_[jf], std::move(fprog));
    finish_backward(ops_[jb], bp);
  }

  const int rank_;
  const std::vector<std::unique_ptr<ModelChunk>>& chunks_;
  const layout::PipelineLayout& layout_;
  const std::vector<Op> ops_;
  const bool split_;
  const std::vector<MicrobatchTensors>& microbatches_;
  transport::Transport& tr_;
  const ExecutionOptions options_;
  StepLosses& losses_;
  std::mutex& losses_mu_;
  std::vector<std::deque<Stored>> stored_;
  std::map<size_t, transport::Transport::PendingRecv> posted_;
};

}  // namespace

StepLosses run_pipeline_step(const std::vector<std::unique_ptr<ModelChunk>>& chunks,
                             const layout::PipelineLayout& layout,
                             const schedule::ScheduleConfig& schedule,
                             const std::vector<MicrobatchTensors>& microbatches,
                             transport::Transport& transport, const ExecutionOptions& options,
                             const std::vector<int>& local_ranks) {
  const int P = layout.pipeline_size;
  const size_t M = microbatches.size();
  const bool split = schedule.kind == schedule::ScheduleKind::kCombined1F1B;
  StepLosses losses;
  losses.lm.assign(M, 0.0);
  losses.mtp.assign(M, {});
  std::mutex losses_mu;
  std::vector<std::exception_ptr> errors(P);
  std::vector<std::string> error_text(P);
  auto body = [&](int rank) {
    try {
      RankExecutor ex(rank, chunks, layout, schedule::rank_ops(schedule, rank), split,
                      microbatches, transport, options, losses, losses_mu);
      ex.run();
    } catch (const std::exception& e) {
      errors[rank] = std::current_exception();
      error_text[rank] = e.what();
      transport.abort(fmt::format("rank {} failed: {}", rank, e.what()));
    } catch (...) {
      errors[rank] = std::current_exception();
      transport.abort(fmt::format("rank {} failed", rank));
    }
  };
  std::vector<int> ranks = local_ranks;
  if (ranks.empty()) {
    for (int r = 0; r < P; ++r) ranks.push_back(r);
  }
  if (ranks.size() == 1) {
    body(ranks[0]);
  } else {
    std::vector<std::thread> threads;
    for (int r : ranks) threads.emplace_back(body, r);
    for (auto& t : threads) t.join();
  }
  int first = -1;
  auto aborted = [&](int r) { return error_text[r].find("aborted: rank") != std::string::npos; };
  for (int r = 0; r < P; ++r) {
    if (!errors[r]) continue;
    if (first < 0 || (!aborted(r) && aborted(first))) first = r;
  }
  if (first >= 0) std::rethrow_exception(errors[first]);
  return losses;
}

}  // namespace mtp::engine
