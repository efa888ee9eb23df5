#include "harness/engine/microbatch_graph.h"

#include <fmt/format.h>

#include "harness/common/error.h"
#include "harness/gpu/cuda_graph.h"

namespace mtp::engine {

MicrobatchGraph::MicrobatchGraph(const at::Device& device)
    : graph_(std::make_unique<gpu::CudaGraph>(device.index() < 0 ? 0 : device.index(),
                                              gpu::CudaGraph::CaptureScope::kThread)) {}

MicrobatchGraph::~MicrobatchGraph() = default;

void MicrobatchGraph::body(const ModelChunk& chunk, const MicrobatchTensors& mb,
                           const std::function<void()>& after_backward) {
  auto prog = chunk.program(at::Tensor(), mb, /*split=*/false);
  prog->forward_all();
  lm_ = prog->lm;
  mtp_ = prog->mtp;
  prog->backward_all(at::Tensor());
  if (after_backward) after_backward();
}

MicrobatchGraph::Losses MicrobatchGraph::run(const ModelChunk& chunk, const MicrobatchTensors& mb,
                                             const std::function<void()>& after_backward) {
  MTP_INTERNAL_ASSERT(chunk.plan().has_loss && chunk.input_shape().empty(),
                      "a microbatch graph needs a chunk that is stage 0 and the loss stage");
  MTP_INTERNAL_ASSERT(chunk_ == nullptr || chunk_ == &chunk,
                      "a microbatch graph replayed for another chunk");
  chunk_ = &chunk;
  if (counts_.eager == 0) {
    graph_->run_eagerly([&] { body(chunk, mb, after_backward); });
    ++counts_.eager;
  } else {
    if (!graph_->captured()) {
      // Static inputs outside the graph's pool, filled below like every replay's.
      static_ = MicrobatchTensors{};
      static_.tokens = at::empty_like(mb.tokens);
      static_.labels = at::empty_like(mb.labels);
      static_.loss_mask = at::empty_like(mb.loss_mask);
      static_.num_microbatches = mb.num_microbatches;
    }
    MTP_INTERNAL_ASSERT(mb.tokens.sizes() == static_.tokens.sizes() &&
                            mb.labels.sizes() == static_.labels.sizes() &&
                            mb.loss_mask.sizes() == static_.loss_mask.sizes() &&
                            mb.num_microbatches == static_.num_microbatches,
                        fmt::format("a microbatch graph captured for tokens {} replayed for {}",
                                    c10::str(static_.tokens.sizes()), c10::str(mb.tokens.sizes())));
    static_.tokens.copy_(mb.tokens);
    static_.labels.copy_(mb.labels);
    static_.loss_mask.copy_(mb.loss_mask);
    if (!graph_->captured()) {
      graph_->capture([&] { body(chunk, static_, after_backward); });
      ++counts_.captured;
    } else {
      ++counts_.replayed;
    }
    graph_->replay();
  }
  // Copies on the caller's stream, ordered after the replay: the next replay overwrites lm_.
  Losses out{lm_.clone(), {}};
  for (const at::Tensor& t : mtp_) out.mtp.push_back(t.clone());
  return out;
}

}  // namespace mtp::engine
