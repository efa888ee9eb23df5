#include "harness/engine/executor.h"

#include <fmt/format.h>

#include <ATen/ThreadLocalState.h>

#include <deque>
#include <exception>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include "harness/common/error.h"
#include "harness/engine/determinism.h"
#include "harness/gpu/side_stream.h"
#include "harness/transport/transport.h"

namespace mtp::engine {
namespace {

using schedule::Op;
using schedule::OpType;
using transport::MessageTag;
using Kind = MessageTag::Kind;

/// Executes one rank's op list for one step.
class RankExecutor {
 public:
  RankExecutor(const RankStep& rank, const layout::PipelineLayout& layout,
               const schedule::ScheduleConfig& schedule,
               const std::vector<MicrobatchTensors>& microbatches, transport::Transport& tr,
               const ExecutionOptions& options, StepLosses& losses)
      : rank_(rank.pipeline_rank),
        chunks_(rank.chunks),
        peers_(rank.transport_ranks),
        layout_(layout),
        ops_(schedule::rank_ops(schedule, rank.pipeline_rank)),
        def_(schedule::schedule_def(schedule.kind)),
        split_(def_.combined_steps),
        microbatches_(microbatches),
        tr_(tr),
        options_(options),
        losses_(losses),
        stored_(layout.virtual_size),
        in_flight_(layout.virtual_size) {}

  void run() {
    pin_thread_determinism();
    if (options_.graph != nullptr) {
      run_graphed();
      return;
    }
    run_ops();
    read_losses();
    tr_.note(me(), "finished its schedule");
  }

 private:
  void run_ops() {
    MTP_INTERNAL_ASSERT(
        options_.pipeline_graphs == nullptr || (!split_ && !options_.after_microbatch_backward),
        "pipelined CUDA graphs need a plain schedule and Megatron's accumulation");
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (options_.overlap_p2p && j + 1 < ops_.size()) post(j + 1);
      const bool pair = schedule::combined_pair_at(split_, ops_, j);
      if (pair) {
        if (options_.overlap_p2p && j + 2 < ops_.size()) post(j + 2);
        combined(j, j + 1);
        ++j;
      } else if (options_.pipeline_graphs != nullptr) {
        if (ops_[j].type == OpType::kForward) {
          graphed_forward(j);
        } else {
          graphed_backward(j);
        }
      } else if (ops_[j].type == OpType::kForward) {
        auto prog = begin_forward(j);
        ComputeScope scope(*this, j);
        prog->forward_all();
        scope.end();
        finish_forward(ops_[j], std::move(prog));
      } else {
        auto s = begin_backward(j);
        ComputeScope scope(*this, j);
        if (split_) {
          // Node by node, so that main grads are accumulated after each node's backward.
          for (size_t n = s.prog->size(); n-- > 0;) {
            s.prog->backward_node(n, s.grad);
            backward_done(ops_[j]);
          }
        } else {
          s.prog->backward_all(s.grad);
          backward_done(ops_[j]);
        }
        scope.end();
        finish_backward(ops_[j], *s.prog);
      }
    }
  }

  // Brackets the compute of op j (`paired`: with op j + 1 as its combined 1F1B backward) with
  // ExecutionOptions::before_compute and after_compute: after_compute at end(), or, when the
  // compute throws, on unwinding (its own exception then swallowed: the compute's is the one to
  // report), so a hook that serialises ranks never keeps the others waiting.
  class ComputeScope {
   public:
    ComputeScope(const RankExecutor& ex, size_t j, bool paired = false)
        : after_(ex.options_.after_compute), block_{ex.rank_, ex.ops_[j], std::nullopt} {
      if (paired) block_.paired_backward = ex.ops_[j + 1];
      if (ex.options_.before_compute) ex.options_.before_compute(block_);
    }
    ComputeScope(const ComputeScope&) = delete;
    ComputeScope& operator=(const ComputeScope&) = delete;
    void end() {
      if (ended_) return;
      ended_ = true;
      if (after_) after_(block_);
    }
    ~ComputeScope() {
      if (ended_ || !after_) return;
      try {
        after_(block_);
      } catch (...) {
      }
    }

   private:
    const std::function<void(const ComputeBlock&)>& after_;
    ComputeBlock block_;
    bool ended_ = false;
  };

  struct Stored {
    int microbatch;
    std::unique_ptr<model::ChunkProgram> prog;
  };
  struct Backward {
    std::unique_ptr<model::ChunkProgram> prog;
    at::Tensor grad;  // received output grad; undefined on the loss stage
  };

  // A single-stage model through its microbatch graph: the ops are F(m), B(m) for m = 0..M−1.
  void run_graphed() {
    MTP_INTERNAL_ASSERT(layout_.num_stages() == 1 && !split_ && !options_.overlap_p2p,
                        "CUDA graphs need a layout of one stage and a plain schedule");
    const std::function<void()> after = [this] {
      if (options_.after_backward) options_.after_backward(0);
    };
    for (size_t j = 0; j < ops_.size(); j += 2) {
      MTP_INTERNAL_ASSERT(j + 1 < ops_.size() && ops_[j].type == OpType::kForward &&
                              ops_[j + 1].type == OpType::kBackward &&
                              ops_[j].microbatch == ops_[j + 1].microbatch,
                          "CUDA graphs need each microbatch's backward right after its forward");
      const int mb = ops_[j].microbatch;
      tr_.note(me(), fmt::format("microbatch {} through its CUDA graph", mb));
      MicrobatchGraph::Losses l = options_.graph->run(*chunks_[0], microbatches_[mb], after);
      loss_values_[mb] = {std::move(l.lm), std::move(l.mtp)};
    }
    read_losses();
    tr_.note(me(), "finished its schedule");
  }

  // Forward op j of a pipelined schedule through its stage's CUDA graphs (chunk_graphs.h).
  void graphed_forward(size_t j) {
    const Op& op = ops_[j];
    const int s = stage(op);
    tr_.note(me(), fmt::format("forward chunk {} (stage {}) microbatch {} through its graphs",
                               op.chunk, s, op.microbatch));
    at::Tensor input = fetch(j);
    if (input.defined() && s == options_.zero_input_stage) {
      input = at::zeros_like(input);  // planted bug: the receive buffer was never filled
    }
    ComputeScope scope(*this, j);
    ChunkGraphs::Forward f = options_.pipeline_graphs->stage(s).forward(
        *chunks_[s], input, microbatches_[op.microbatch]);
    scope.end();
    if (s == last_stage()) {
      loss_values_[op.microbatch] = {std::move(f.lm), std::move(f.mtp)};
    } else {
      tr_.send(me(), rank_of(s + 1), {Kind::kActivation, s, op.microbatch}, f.result);
    }
    in_flight_[op.chunk].emplace_back(op.microbatch, std::move(f.in_flight));
  }

  // Backward op j of a pipelined schedule through its stage's CUDA graphs.
  void graphed_backward(size_t j) {
    const Op& op = ops_[j];
    const int s = stage(op);
    tr_.note(me(), fmt::format("backward chunk {} (stage {}) microbatch {} through its graphs",
                               op.chunk, s, op.microbatch));
    auto& q = in_flight_[op.chunk];
    MTP_INTERNAL_ASSERT(!q.empty() && q.front().first == op.microbatch,
                        fmt::format("rank {}: backward of chunk {} microbatch {} is not FIFO",
                                    rank_, op.chunk, op.microbatch));
    ChunkGraphs::InFlight f = std::move(q.front().second);
    q.pop_front();
    if (options_.before_backward) options_.before_backward(s);
    const at::Tensor grad = fetch(j);
    ComputeScope scope(*this, j);
    const at::Tensor input_grad =
        options_.pipeline_graphs->stage(s).backward(std::move(f), grad, [this, s] {
          if (options_.after_backward) options_.after_backward(s);
        });
    scope.end();
    if (s == 0) return;
    MTP_INTERNAL_ASSERT(input_grad.defined(),
                        fmt::format("stage {} produced no input gradient", s));
    tr_.send(me(), rank_of(s - 1), {Kind::kGradient, s, op.microbatch}, input_grad);
  }

  // The loss stage's per-microbatch losses, read back from the device once, after the step's
  // last op (reading them after each forward would stall the host behind the GPU every time).
  void read_losses() {
    for (size_t mb = 0; mb < loss_values_.size(); ++mb) {
      const auto& [lm, mtp] = loss_values_[mb];
      if (!lm.defined()) continue;
      losses_.lm[mb] = lm.item<double>();
      losses_.mtp[mb].clear();
      for (const at::Tensor& t : mtp) losses_.mtp[mb].push_back(t.item<double>());
    }
  }

  int stage(const Op& op) const { return op.chunk * layout_.pipeline_size + rank_; }
  int last_stage() const { return layout_.num_stages() - 1; }
  /// Transport rank of the pipeline rank holding `stage`.
  int rank_of(int stage) const { return peers_[stage % layout_.pipeline_size]; }
  int me() const { return peers_[rank_]; }

  // The receive op j needs, if any: its input activation (forward, not stage 0) or its output
  // gradient (backward, not the loss stage).
  bool needs_recv(size_t j, transport::Transport::PendingRecv& r) const {
    const Op& op = ops_[j];
    const int s = stage(op);
    if (op.type == OpType::kForward) {
      if (s == 0) return false;
      r = {me(),
           rank_of(s - 1),
           {Kind::kActivation, s - 1, op.microbatch},
           chunks_[s]->input_shape()};
    } else {
      if (s == last_stage()) return false;
      r = {me(),
           rank_of(s + 1),
           {Kind::kGradient, s + 1, op.microbatch},
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
    tr_.note(me(), fmt::format("forward chunk {} (stage {}) microbatch {}", op.chunk, stage(op),
                               op.microbatch));
    at::Tensor input = fetch(j);
    if (input.defined() && stage(op) == options_.zero_input_stage) {
      input = at::zeros_like(input);  // planted bug: the receive buffer was never filled
    }
    if (input.defined()) input.requires_grad_(true);
    return chunks_[stage(op)]->program(input, microbatches_[op.microbatch], split_);
  }

  void finish_forward(const Op& op, std::unique_ptr<model::ChunkProgram> prog) {
    const int s = stage(op);
    if (s == last_stage()) {
      loss_values_[op.microbatch] = {prog->lm, prog->mtp};
    } else {
      tr_.send(me(), rank_of(s + 1), {Kind::kActivation, s, op.microbatch}, prog->result);
    }
    stored_[op.chunk].push_back({op.microbatch, std::move(prog)});
  }

  Backward begin_backward(size_t j) {
    const Op& op = ops_[j];
    tr_.note(me(), fmt::format("backward chunk {} (stage {}) microbatch {}", op.chunk, stage(op),
                               op.microbatch));
    auto& q = stored_[op.chunk];
    MTP_INTERNAL_ASSERT(!q.empty() && q.front().microbatch == op.microbatch,
                        fmt::format("rank {}: backward of chunk {} microbatch {} is not FIFO",
                                    rank_, op.chunk, op.microbatch));
    Backward b{std::move(q.front().prog), {}};
    q.pop_front();
    if (options_.before_backward) options_.before_backward(stage(op));
    b.grad = fetch(j);
    return b;
  }

  void backward_done(const Op& op) {
    if (options_.after_backward) options_.after_backward(stage(op));
  }

  void finish_backward(const Op& op, const model::ChunkProgram& prog) {
    const int s = stage(op);
    if (options_.after_microbatch_backward) {
      options_.after_microbatch_backward(s, op.microbatch, prog);
    }
    if (s == 0) return;
    MTP_INTERNAL_ASSERT(prog.input.grad().defined(),
                        fmt::format("stage {} produced no input gradient", s));
    tr_.send(me(), rank_of(s - 1), {Kind::kGradient, s, op.microbatch}, prog.input.grad());
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
  // microbatches. F's groups run forward first to last while B's run backward last to first;
  // the k-th layer group of each side (F: layer k of its chunk, B: its k-th layer from the end)
  // run as a pair, their nodes interleaved in Megatron's sub-step order, and every group outside
  // a layer (pre-processing, the reference's final layernorm, post-processing) runs alone when
  // its side reaches it, B's before F's (Megatron TransformerModelChunkSchedulePlan.run: F's
  // pre-process and B's post-process first, then the layers paired, then the rest).
  void combined(size_t jf, size_t jb) {
    auto fprog = begin_forward(jf);
    Backward b = begin_backward(jb);
    tr_.note(me(),
             fmt::format("combined step: forward chunk {} mb {} | backward chunk {} mb {}",
                         ops_[jf].chunk, ops_[jf].microbatch, ops_[jb].chunk, ops_[jb].microbatch));
    model::ChunkProgram& f = *fprog;
    model::ChunkProgram& bp = *b.prog;
    const auto fg = groups(f);
    const auto bg = groups(bp);
    auto trace = [&](OpType side, const model::ChunkProgram& p, size_t i) {
      if (options_.after_combined_node) {
        options_.after_combined_node(side, p.node(i).kind, p.node(i).layer);
      }
    };
    auto fwd_only = [&](size_t i) { f.forward_node(i); };
    auto bwd_only = [&](size_t i) { bp.backward_node(i, b.grad); };
    auto fwd = [&](size_t i) {
      fwd_only(i);
      trace(OpType::kForward, f, i);
    };
    auto bwd = [&](size_t i) {
      bwd_only(i);
      backward_done(ops_[jb]);
      trace(OpType::kBackward, bp, i);
    };
    ComputeScope scope(*this, jf, /*paired=*/true);
    // fi: F's next group; bi: B's next group counted from its last.
    size_t fi = 0, bi = 0;
    auto is_layer = [](const model::ChunkProgram& p, const std::vector<size_t>& g) {
      return p.node(g.front()).layer >= 0;
    };
    while (fi < fg.size() || bi < bg.size()) {
      const std::vector<size_t>* F = fi < fg.size() ? &fg[fi] : nullptr;
      const std::vector<size_t>* B = bi < bg.size() ? &bg[bg.size() - 1 - bi] : nullptr;
      // A group outside a layer runs alone (B's first); two layer groups run as a pair.
      if (B != nullptr && (!is_layer(bp, *B) || F == nullptr)) {
        F = nullptr;
      } else if (F != nullptr && (!is_layer(f, *F) || B == nullptr)) {
        B = nullptr;
      }
      fi += F != nullptr ? 1 : 0;
      bi += B != nullptr ? 1 : 0;
      std::vector<bool> fdone(F ? F->size() : 0, false), bdone(B ? B->size() : 0, false);
      // The position in `side`'s group of its next node when that node is of kind `kind`.
      auto next_of = [&](const schedule::SubStep& s) -> std::optional<size_t> {
        const bool fwd_side = s.side == OpType::kForward;
        const auto* g = fwd_side ? F : B;
        if (g == nullptr) return std::nullopt;
        const auto& done = fwd_side ? fdone : bdone;
        const auto& prog = fwd_side ? f : bp;
        // Forward takes its nodes in order, backward in reverse: only the next one may run.
        const size_t n = g->size();
        for (size_t k = 0; k < n; ++k) {
          const size_t idx = fwd_side ? k : n - 1 - k;
          if (done[idx]) continue;
          if (prog.node((*g)[idx]).kind == s.node) return idx;
          return std::nullopt;
        }
        return std::nullopt;
      };
      // Runs node `idx` of `side`'s group; `finish`: also the backward's main-grad hook.
      auto run_at = [&](OpType side, size_t idx, bool finish) {
        if (side == OpType::kForward) {
          finish ? fwd((*F)[idx]) : fwd_only((*F)[idx]);
          fdone[idx] = true;
        } else {
          finish ? bwd((*B)[idx]) : bwd_only((*B)[idx]);
          bdone[idx] = true;
        }
      };
      auto is_comm = [](model::NodeKind k) {
        return k == model::NodeKind::kDispatch || k == model::NodeKind::kCombine;
      };
      if (F && B) {
        const auto& order = def_.combined_order;
        for (size_t s = 0; s < order.size(); ++s) {
          const std::optional<size_t> a = next_of(order[s]);
          if (!a) continue;
          const std::optional<size_t> b2 =
              options_.overlap_expert_comm && s + 1 < order.size() &&
                      order[s + 1].side != order[s].side &&
                      is_comm(order[s].node) != is_comm(order[s + 1].node)
                  ? next_of(order[s + 1])
                  : std::nullopt;
          if (!b2) {
            run_at(order[s].side, *a, /*finish=*/true);
            continue;
          }
          // An all-to-all node on the side thread, the paired compute node here.
          const bool first_is_comm = is_comm(order[s].node);
          const schedule::SubStep& comm_step = first_is_comm ? order[s] : order[s + 1];
          const schedule::SubStep& compute_step = first_is_comm ? order[s + 1] : order[s];
          const size_t comm_idx = first_is_comm ? *a : *b2;
          const size_t compute_idx = first_is_comm ? *b2 : *a;
          const at::ThreadLocalState tls;  // grad mode and dispatch state of this thread
          // The side stream starts after the compute issued so far, not after the paired node's.
          const gpu::SideStreamFence fence(options_.device);
          std::future<void> side = std::async(std::launch::async, [&, tls] {
            at::ThreadLocalStateGuard guard(tls);
            pin_thread_determinism();
            const gpu::SideStreamFence::Scope on_side(
                fence, /*side_stream_current=*/comm_step.side == OpType::kBackward);
            run_at(comm_step.side, comm_idx, /*finish=*/false);
          });
          std::exception_ptr compute_error;
          try {
            run_at(compute_step.side, compute_idx, /*finish=*/false);
          } catch (const std::exception& e) {
            compute_error = std::current_exception();
            tr_.abort(fmt::format("rank {} failed: {}", me(), e.what()));  // frees the side thread
          }
          side.get();  // rethrows the side thread's error
          if (compute_error) std::rethrow_exception(compute_error);
          // Main grads after the pair, in the serial order's sequence.
          for (size_t q = s; q <= s + 1; ++q) {
            const bool fwd_side = order[q].side == OpType::kForward;
            const size_t idx = q == s ? *a : *b2;
            if (!fwd_side) backward_done(ops_[jb]);
            trace(order[q].side, fwd_side ? f : bp, fwd_side ? (*F)[idx] : (*B)[idx]);
          }
          ++s;
        }
      }
      // Whatever the template did not cover (a group alone, a pair's leftovers): B then F.
      for (size_t k = B ? B->size() : 0; k-- > 0;) {
        if (!bdone[k]) bwd((*B)[k]);
      }
      for (size_t k = 0; F && k < F->size(); ++k) {
        if (!fdone[k]) fwd((*F)[k]);
      }
    }
    scope.end();
    finish_forward(ops_[jf], std::move(fprog));
    finish_backward(ops_[jb], bp);
  }

  const int rank_;  // pipeline rank
  const std::vector<const ModelChunk*>& chunks_;
  const std::vector<int>& peers_;
  const layout::PipelineLayout& layout_;
  const std::vector<Op> ops_;
  const schedule::ScheduleDef& def_;
  const bool split_;
  const std::vector<MicrobatchTensors>& microbatches_;
  transport::Transport& tr_;
  const ExecutionOptions options_;
  StepLosses& losses_;
  std::vector<std::deque<Stored>> stored_;
  /// Per chunk: (microbatch, its slot) of pipelined CUDA graphs, first in first out.
  std::vector<std::deque<std::pair<int, ChunkGraphs::InFlight>>> in_flight_;
  std::map<size_t, transport::Transport::PendingRecv> posted_;
  /// Loss stage: each microbatch's lm and mtp_k losses as 0-dim device tensors until read_losses.
  std::vector<std::pair<at::Tensor, std::vector<at::Tensor>>> loss_values_ =
      std::vector<std::pair<at::Tensor, std::vector<at::Tensor>>>(microbatches_.size());
};

}  // namespace

StepLosses run_rank_step(const RankStep& rank, const layout::PipelineLayout& layout,
                         const schedule::ScheduleConfig& schedule,
                         const std::vector<MicrobatchTensors>& microbatches,
                         transport::Transport& transport, const ExecutionOptions& options) {
  StepLosses losses;
  if ((layout.num_stages() - 1) % layout.pipeline_size == rank.pipeline_rank) {
    losses.lm.assign(microbatches.size(), 0.0);
    losses.mtp.assign(microbatches.size(), {});
  }
  RankExecutor ex(rank, layout, schedule, microbatches, transport, options, losses);
  ex.run();
  return losses;
}

void run_on_threads(int n, const std::function<void(int)>& body,
                    const std::function<void(int, const std::string&)>& on_error) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<bool> aborted(n, false);
  auto guarded = [&](int i) {
    try {
      body(i);
    } catch (const transport::TransportAborted& e) {
      errors[i] = std::current_exception();
      aborted[i] = true;
      on_error(i, e.what());
    } catch (const std::exception& e) {
      errors[i] = std::current_exception();
      on_error(i, e.what());
    } catch (...) {
      errors[i] = std::current_exception();
      on_error(i, "unknown exception");
    }
  };
  if (n == 1) {
    guarded(0);
  } else {
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) threads.emplace_back(guarded, i);
    for (auto& t : threads) t.join();
  }
  int first = -1;
  for (int i = 0; i < n; ++i) {
    if (!errors[i]) continue;
    if (first < 0 || (!aborted[i] && aborted[first])) first = i;
  }
  if (first >= 0) std::rethrow_exception(errors[first]);
}

StepLosses run_pipeline_step(const std::vector<std::unique_ptr<ModelChunk>>& chunks,
                             const layout::PipelineLayout& layout,
                             const schedule::ScheduleConfig& schedule,
                             const std::vector<MicrobatchTensors>& microbatches,
                             transport::Transport& transport, const ExecutionOptions& options) {
  const int P = layout.pipeline_size;
  std::vector<const ModelChunk*> all;
  for (const auto& c : chunks) all.push_back(c.get());
  std::vector<int> peers;
  for (int p = 0; p < P; ++p) peers.push_back(p);
  std::vector<StepLosses> losses(P);
  run_on_threads(
      P,
      [&](int p) {
        pin_thread_determinism();
        losses[p] =
            run_rank_step({p, all, peers}, layout, schedule, microbatches, transport, options);
      },
      [&](int p, const std::string& why) {
        transport.abort(fmt::format("rank {} failed: {}", p, why));
      });
  return losses[(layout.num_stages() - 1) % P];
}

}  // namespace mtp::engine
