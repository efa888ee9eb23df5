#include "harness/model/linear.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <vector>

namespace mtp::model {
namespace {

struct Grads {
  at::Tensor y, dx, dweight;
};

/// y = f(x, weight) and backward of y with `grad_y`, on fresh leaves of the same values.
template <typename F>
Grads run(F f, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& grad_y, bool x_grad,
          bool weight_grad) {
  auto xl = x.clone().requires_grad_(x_grad);
  auto wl = weight.clone().requires_grad_(weight_grad);
  auto y = f(xl, wl);
  y.backward(grad_y);
  return {y.detach(), xl.grad(), wl.grad()};
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.sizes() == b.sizes() && a.strides() == b.strides() && at::equal(a, b);
}

std::string fmt_case(const std::vector<int64_t>& x, int64_t out, at::ScalarType dtype, bool x_grad,
                     bool weight_grad) {
  return fmt::format("x [{}], out {}, {}, x grad {}, weight grad {}", fmt::join(x, ", "), out,
                     c10::toString(dtype), x_grad, weight_grad);
}

at::Tensor composite(const at::Tensor& x, const at::Tensor& w) { return at::matmul(x, w.t()); }

/// Every shape, dtype and requires-grad combination against LibTorch's at::matmul(x, w.t()):
/// outputs, both gradients and their strides, bit for bit.
void expect_bitwise_the_composite(const at::Device& device) {
  struct Case {
    std::vector<int64_t> x;
    int64_t out;
  };
  const std::vector<Case> cases = {{{8, 2, 16}, 48},   {{64, 3, 96}, 288}, {{37, 100}, 5},
                                   {{1, 1, 1}, 7},     {{1, 1}, 1},        {{5, 2, 3, 9}, 1},
                                   {{128, 1, 33}, 129}};
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
    for (const Case& c : cases) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(c.out * 131 + c.x.back());
      auto opts = at::TensorOptions().dtype(at::kFloat);
      auto x = at::randn(c.x, gen, opts).to(dtype).to(device);
      auto w = at::randn({c.out, c.x.back()}, gen, opts).to(dtype).to(device);
      auto y_sizes = c.x;
      y_sizes.back() = c.out;
      auto gy = at::randn(y_sizes, gen, opts).to(dtype).to(device);
      for (auto [xg, wg] : {std::pair{true, true}, {true, false}, {false, true}}) {
        const std::string what = fmt_case(c.x, c.out, dtype, xg, wg);
        auto a = run(linear_node, x, w, gy, xg, wg);
        auto b = run(composite, x, w, gy, xg, wg);
        EXPECT_TRUE(same_bits(a.y, b.y)) << what;
        EXPECT_TRUE(same_bits(a.dx, b.dx)) << what;
        EXPECT_TRUE(same_bits(a.dweight, b.dweight)) << what;
      }
    }
  }
}

TEST(LinearTest, BitwiseTheMatmulComposite) { expect_bitwise_the_composite(at::Device(at::kCPU)); }

TEST(LinearCudaTest, BitwiseTheMatmulComposite_CUDA) {
  if (!at::hasCUDA()) GTEST_SKIP() << "needs a CUDA build and a GPU";
  expect_bitwise_the_composite(at::Device(at::kCUDA, 0));
}

TEST(LinearTest, OneNodeWhereTheCompositeRecordsFour) {
  auto x = at::randn({4, 2, 8}).requires_grad_();
  auto w = at::randn({6, 8}).requires_grad_();
  auto y = linear_node(x, w);
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{4, 2, 6}));
  ASSERT_TRUE(y.grad_fn());
  EXPECT_NE(y.grad_fn()->name().find("Linear"), std::string::npos) << y.grad_fn()->name();
  // Its inputs are the leaves themselves: no view or transpose node between.
  for (const auto& edge : y.grad_fn()->next_edges()) {
    ASSERT_TRUE(edge.function);
    EXPECT_NE(edge.function->name().find("AccumulateGrad"), std::string::npos);
  }
  auto composite_y = at::matmul(x, w.t());
  EXPECT_EQ(composite_y.grad_fn()->name(), "UnsafeViewBackward0");
}

/// Passes its input on and gives it no gradient (an undefined one).
struct NoGradient : public torch::autograd::Function<NoGradient> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) {
    return x.view_as(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list) {
    return {at::Tensor()};
  }
};

TEST(LinearTest, UndefinedGradientStaysUndefinedAndOtherLayoutsTakeTheComposite) {
  // The node is called with an undefined gradient and gives none, as the built-in nodes do (a
  // materialised zero would make the weight's grad a defined +0, and +0 + −0 is +0).
  auto x = at::randn({3, 4}).requires_grad_();
  auto w = at::randn({5, 4}).requires_grad_();
  auto loss = NoGradient::apply(linear_node(x, w)).sum() + (x * 2).sum();
  loss.backward();
  EXPECT_FALSE(w.grad().defined());
  EXPECT_TRUE(at::equal(x.grad(), at::full({3, 4}, 2.0)));
  auto wc = w.detach().clone().requires_grad_();  // the composite: the same
  NoGradient::apply(at::matmul(x.detach(), wc.t())).sum().backward();
  EXPECT_FALSE(wc.grad().defined());
  // A transposed x (not contiguous) and a weight viewed transposed fall back to at::matmul.
  auto xt = at::randn({4, 3}).t();
  EXPECT_EQ(linear_node(xt, w.detach()).sizes().vec(), (std::vector<int64_t>{3, 5}));
  auto wt = at::randn({4, 5}).t().requires_grad_();
  auto y2 = linear_node(at::randn({2, 4}), wt);
  EXPECT_EQ(y2.grad_fn()->name(), "MmBackward0");
}

}  // namespace
}  // namespace mtp::model
