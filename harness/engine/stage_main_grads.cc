#include "harness/engine/stage_main_grads.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include "harness/common/error.h"
#include "kernels/ops.h"

namespace mtp::engine {

StageMainGrads::StageMainGrads(const std::vector<std::unique_ptr<ModelChunk>>& chunks) {
  for (const auto& c : chunks) {
    std::vector<std::pair<at::Tensor, at::Tensor>> stage;
    for (const auto& entry : c->params().entries()) {
      stage.emplace_back(entry.second,
                         at::zeros(entry.second.sizes(), entry.second.options().dtype(at::kFloat)));
    }
    grads_.push_back(std::move(stage));
  }
}

void StageMainGrads::accumulate(int stage) {
  MTP_INTERNAL_ASSERT(stage >= 0 && stage < static_cast<int>(grads_.size()),
                      fmt::format("main grads of stage {} of {}", stage, grads_.size()));
  c10::NoGradGuard no_grad;
  for (auto& [weight, main] : grads_[static_cast<size_t>(stage)]) {
    if (!weight.grad().defined()) continue;
    kernels::accumulate_main_grad(main, weight.grad());
    weight.mutable_grad().reset();
  }
}

void StageMainGrads::zero() {
  for (auto& stage : grads_) {
    for (auto& entry : stage) entry.second.zero_();
  }
}

}  // namespace mtp::engine
