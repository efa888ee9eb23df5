#include "harness/engine/grad_clip.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

#include "harness/record/schema.h"

namespace mtp::engine {

double clip_grads_by_global_norm(double max_norm, int64_t step,
                                 const std::vector<at::Tensor>& grads, LocalModel& model,
                                 collectives::Communicator& comm, const collectives::Group& world,
                                 const at::Device& device, StepRecorder* recorder,
                                 config::Fault inject) {
  if (!(max_norm > 0.0)) return 1.0;
  at::Tensor coeff = at::ones({1}, at::TensorOptions().dtype(at::kDouble).device(device));
  if (comm.rank() == 0) {
    double sumsq = 0.0;
    for (const auto& g : grads) {
      auto d = g.to(at::kDouble);
      sumsq += (d * d).sum().item<double>();
    }
    if (inject == config::Fault::kEmbeddingNormCountedTwice && !grads.empty()) {
      const auto d = grads[0].to(at::kDouble);  // planted bug: the embedding counted again
      sumsq += (d * d).sum().item<double>();
    }
    const double norm = std::sqrt(sumsq);
    const double c = std::min(max_norm / (norm + 1e-6), 1.0);
    if (recorder != nullptr) {
      recorder->set_step_attr(step, record::kGradNormAttr, norm);
      recorder->set_step_attr(step, record::kClipCoeffAttr, c);
    }
    coeff.fill_(c);
  }
  comm.broadcast(world, 0, coeff);
  const double c = coeff.cpu().item<double>();
  if (c < 1.0) {
    c10::NoGradGuard no_grad;
    for (auto& buf : model.buffers) buf.grad_data.mul_(c);
  }
  return c;
}

}  // namespace mtp::engine
