#include "harness/model/fan_out.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include "harness/common/error.h"

namespace mtp::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The node: one input, `uses` outputs; each output slot receives exactly one consumer's
/// gradient, so nothing is accumulated in arrival order before backward sums them in slot order.
struct FanOut : public torch::autograd::Function<FanOut> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, int64_t uses) {
    ctx->set_materialize_grads(false);  // an unused slot stays undefined (no + 0: keeps −0)
    variable_list out;
    out.reserve(static_cast<size_t>(uses));
    for (int64_t i = 0; i < uses; ++i) out.push_back(x.view_as(x));
    return out;
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    at::Tensor sum;
    for (const at::Tensor& g : grads) {
      if (!g.defined()) continue;
      sum = sum.defined() ? sum + g : g;
    }
    return {sum, at::Tensor()};
  }
};

}  // namespace

std::vector<at::Tensor> fan_out(const at::Tensor& x, int uses) {
  MTP_INTERNAL_ASSERT(uses >= 1, fmt::format("fan_out: {} uses", uses));
  if (!x.requires_grad()) return std::vector<at::Tensor>(static_cast<size_t>(uses), x);
  return FanOut::apply(x, static_cast<int64_t>(uses));
}

}  // namespace mtp::model
