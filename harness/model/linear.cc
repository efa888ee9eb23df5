#include "harness/model/linear.h"

#include <torch/csrc/autograd/custom_function.h>

namespace mtp::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// LibTorch's test in mm_mat1_backward / mm_mat2_backward (FunctionsManual.cpp): a matrix is
/// column-major when its strides are (1, rows).
bool column_major(const at::Tensor& m) { return m.stride(0) == 1 && m.stride(1) == m.size(0); }

struct Linear : public torch::autograd::Function<Linear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight) {
    ctx->set_materialize_grads(false);
    // What MmBackward0 saves: mat1 when mat2 needs a grad, mat2 when mat1 does.
    ctx->save_for_backward(
        {weight.requires_grad() ? x : at::Tensor(), x.requires_grad() ? weight : at::Tensor()});
    const auto x2 = x.reshape({-1, x.size(-1)});  // at::matmul's fold: a view of a contiguous x
    ctx->saved_data["x_column_major"] = column_major(x2);
    auto sizes = x.sizes().vec();
    sizes.back() = weight.size(0);
    return at::_unsafe_view(x2.mm(weight.t()), sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor& grad = grads[0];
    if (!grad.defined()) return {at::Tensor(), at::Tensor()};
    auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    auto g = grad.reshape({-1, grad.size(-1)});  // UnsafeViewBackward0
    at::Tensor dx, dweight;
    if (ctx->needs_input_grad(0)) {
      auto x_sizes = grad.sizes().vec();
      x_sizes.back() = weight.size(1);
      // mm_mat1_backward with mat2 = weight.t() (whose .t().conj() is weight itself).
      auto dx2 =
          ctx->saved_data["x_column_major"].toBool() ? weight.t().mm(g.t()).t() : g.mm(weight);
      dx = dx2.reshape(x_sizes);  // the fold's view node
    }
    // mm_mat2_backward with a column-major mat2 (weight.t()): (gᵀ·x)ᵀ, then TBackward0's ᵀ.
    if (ctx->needs_input_grad(1)) dweight = g.t().mm(x.reshape({-1, x.size(-1)}));
    return {dx, dweight};
  }
};

}  // namespace

at::Tensor linear_node(const at::Tensor& x, const at::Tensor& weight) {
  // Where at::matmul would not fold to one mm of a row-view of x, or LibTorch's mat2 branch
  // would differ (weight.t() not column-major), the composite itself.
  if (x.dim() < 2 || !x.is_contiguous() || weight.dim() != 2 || !column_major(weight.t())) {
    return at::matmul(x, weight.t());
  }
  return Linear::apply(x, weight);
}

}  // namespace mtp::model
