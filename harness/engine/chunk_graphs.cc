#include "harness/engine/chunk_graphs.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include "harness/common/error.h"
#include "harness/gpu/cuda_graph.h"

namespace mtp::engine {

/// One in-flight microbatch's room: its graphs, static inputs and the outputs inside the pool.
struct ChunkGraphs::Slot {
  std::unique_ptr<gpu::CudaGraph> forward, backward;
  at::Tensor input;  ///< static received activation, a leaf with requires_grad (not stage 0)
  MicrobatchTensors mb;
  at::Tensor grad;  ///< static received output gradient (not the loss stage)
  at::Tensor result, lm;
  std::vector<at::Tensor> mtp;
  at::Tensor input_grad;                      ///< the backward's input gradient (in the pool)
  std::unique_ptr<model::ChunkProgram> prog;  ///< from the forward's capture to the backward's
  bool busy = false;
};

namespace {

int device_index(const at::Device& d) { return d.index() < 0 ? 0 : d.index(); }

// Copies `from` into the static tensor `to` (allocated on first use, outside any pool).
void fill_static(at::Tensor& to, const at::Tensor& from, const char* what) {
  if (!to.defined()) {
    to = at::empty_like(from, at::MemoryFormat::Contiguous);
  }
  MTP_INTERNAL_ASSERT(to.sizes() == from.sizes() && to.scalar_type() == from.scalar_type(),
                      fmt::format("a chunk graph captured for {} {} replayed for {}", what,
                                  c10::str(to.sizes()), c10::str(from.sizes())));
  c10::NoGradGuard no_grad;
  to.copy_(from);
}

at::Tensor detached_copy(const at::Tensor& t) {
  return t.defined() ? t.detach().clone() : at::Tensor();
}

}  // namespace

ChunkGraphs::ChunkGraphs(const at::Device& device)
    : stream_(std::make_unique<gpu::CudaGraph>(device_index(device),
                                               gpu::CudaGraph::CaptureScope::kThread)) {}

ChunkGraphs::~ChunkGraphs() = default;

int ChunkGraphs::free_slot() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i]->busy) return static_cast<int>(i);
  }
  slots_.push_back(std::make_unique<Slot>());
  slots_.back()->forward = std::make_unique<gpu::CudaGraph>(*stream_, /*share_pool=*/false);
  ++counts_.slots;
  return static_cast<int>(slots_.size()) - 1;
}

ChunkGraphs::Forward ChunkGraphs::forward(const ModelChunk& chunk, const at::Tensor& input,
                                          const MicrobatchTensors& mb) {
  MTP_INTERNAL_ASSERT(chunk_ == nullptr || chunk_ == &chunk,
                      "chunk graphs replayed for another chunk");
  chunk_ = &chunk;
  Forward out;
  if (!warmed_up_) {
    // Warm-up: eager, on the stream the captures will use.
    at::Tensor in = input.defined() ? input.detach().requires_grad_(true) : at::Tensor();
    std::unique_ptr<model::ChunkProgram> prog;
    stream_->run_eagerly([&] {
      prog = chunk.program(in, mb, /*split=*/false);
      prog->forward_all();
    });
    out.result = prog->result.detach();
    out.lm = prog->lm;
    out.mtp = prog->mtp;
    out.in_flight.eager = std::move(prog);
    ++counts_.eager;
    return out;
  }
  // A replay keeps the captured host values: the plan refuses the variants that have some
  // (per-token loss counts, context parallelism's sequence counts).
  MTP_INTERNAL_ASSERT(
      mb.token_counts.empty() && mb.mtp_ratio_counts.empty() && mb.sequence_token_counts.empty(),
      "a chunk graph for a microbatch with host-side token counts");
  out.in_flight.slot = free_slot();
  Slot& s = *slots_[static_cast<size_t>(out.in_flight.slot)];
  s.busy = true;
  if (input.defined()) {
    const bool first = !s.input.defined();
    fill_static(s.input, input, "input");
    if (first) s.input.requires_grad_(true);
  }
  fill_static(s.mb.tokens, mb.tokens, "tokens");
  fill_static(s.mb.labels, mb.labels, "labels");
  fill_static(s.mb.loss_mask, mb.loss_mask, "loss_mask");
  s.mb.num_microbatches = mb.num_microbatches;
  if (!s.forward->captured()) {
    s.forward->capture([&] {
      s.prog = chunk.program(s.input, s.mb, /*split=*/false);
      s.prog->forward_all();
    });
    s.result = s.prog->result;
    s.lm = s.prog->lm;
    s.mtp = s.prog->mtp;
    ++counts_.captured;
  } else {
    ++counts_.replayed;
  }
  s.forward->replay();
  // Copies on the caller's stream, ordered after the replay (CudaGraph's stream order).
  if (s.lm.defined()) {
    out.lm = detached_copy(s.lm);
    for (const at::Tensor& t : s.mtp) out.mtp.push_back(detached_copy(t));
  } else {
    out.result = detached_copy(s.result);
  }
  return out;
}

at::Tensor ChunkGraphs::backward(InFlight in_flight, const at::Tensor& grad,
                                 const std::function<void()>& after_backward) {
  if (in_flight.eager) {
    model::ChunkProgram& prog = *in_flight.eager;
    stream_->run_eagerly([&] {
      prog.backward_all(grad);
      if (after_backward) after_backward();
    });
    warmed_up_ = true;
    return prog.input.defined() ? prog.input.grad().detach() : at::Tensor();
  }
  MTP_INTERNAL_ASSERT(
      in_flight.slot >= 0 && in_flight.slot < static_cast<int>(slots_.size()) &&
          slots_[in_flight.slot]->busy,
      fmt::format("chunk graphs: backward of slot {}, which holds no microbatch", in_flight.slot));
  Slot& s = *slots_[in_flight.slot];
  if (grad.defined()) fill_static(s.grad, grad, "output gradient");
  if (!s.backward) {
    s.backward = std::make_unique<gpu::CudaGraph>(*s.forward, /*share_pool=*/true);
    s.backward->capture([&] {
      s.prog->backward_all(s.grad);
      if (after_backward) after_backward();
    });
    if (s.input.defined()) s.input_grad = s.input.grad();
    s.prog.reset();  // the autograd graph of the capture; its saved tensors stay the pool's
  }
  s.backward->replay();
  s.busy = false;
  return detached_copy(s.input_grad);
}

ChunkGraphs::Counts ChunkGraphs::counts() const { return counts_; }

PipelineGraphs::PipelineGraphs(const at::Device& device, int num_stages)
    : device_(device), stages_(static_cast<size_t>(num_stages)) {}

PipelineGraphs::~PipelineGraphs() = default;

ChunkGraphs& PipelineGraphs::stage(int s) {
  MTP_INTERNAL_ASSERT(s >= 0 && s < static_cast<int>(stages_.size()),
                      fmt::format("pipeline graphs: no stage {}", s));
  auto& g = stages_[static_cast<size_t>(s)];
  if (!g) g = std::make_unique<ChunkGraphs>(device_);
  return *g;
}

ChunkGraphs::Counts PipelineGraphs::counts() const {
  ChunkGraphs::Counts c;
  for (const auto& g : stages_) {
    if (!g) continue;
    const ChunkGraphs::Counts k = g->counts();
    c.eager += k.eager;
    c.captured += k.captured;
    c.replayed += k.replayed;
    c.slots += k.slots;
  }
  return c;
}

}  // namespace mtp::engine
