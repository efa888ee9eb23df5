#include "kernels/testing/op_count.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

namespace mtp::bench {
namespace {

int64_t count_of(const OpCount& c, const std::string& name) {
  for (const auto& [n, k] : c.top(1000)) {
    if (n == name) return k;
  }
  return 0;
}

TEST(OpCountTest, OneOperatorIsOneDispatchedOperator) {
  c10::NoGradGuard no_grad;
  const at::Tensor a = at::ones({2, 3});
  const at::Tensor b = at::ones({2, 3});
  OpCount count(/*by_name=*/true);
  const at::Tensor c = at::add(a, b);
  count.stop();
  EXPECT_EQ(count.dispatched(), 1);
  EXPECT_GE(count.operators(), 1);
  EXPECT_EQ(count.nodes(), 0);
  EXPECT_EQ(count_of(count, "aten::add"), 1);
}

TEST(OpCountTest, NestedOperatorsAreOperatorsButNotDispatched) {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::ones({4, 2, 3});
  const at::Tensor w = at::ones({5, 3});
  OpCount count(/*by_name=*/true);
  const at::Tensor y = at::matmul(x, w.t());  // t, then matmul folding into reshape + mm + view
  count.stop();
  EXPECT_EQ(count.dispatched(), 2);
  EXPECT_GT(count.operators(), 3);
  EXPECT_EQ(count_of(count, "aten::matmul"), 1);
  EXPECT_EQ(count_of(count, "aten::t"), 1);
  EXPECT_EQ(count_of(count, "aten::mm"), 0);  // nested in matmul
}

TEST(OpCountTest, EveryAutogradNodeOfABackwardOnce) {
  const at::Tensor x = torch::ones({2, 3}, torch::requires_grad());
  const at::Tensor y = (x * 2.0).sum();
  OpCount count(/*by_name=*/true);
  y.backward();
  count.stop();
  EXPECT_EQ(count.nodes(), 3);
  EXPECT_EQ(count_of(count, "SumBackward0"), 1);
  EXPECT_EQ(count_of(count, "MulBackward1"), 1);
  EXPECT_EQ(count_of(count, "torch::autograd::AccumulateGrad"), 1);
  EXPECT_EQ(count_of(count, "autograd::engine::evaluate_function: SumBackward0"), 0);
}

TEST(OpCountTest, OtherThreadsCountAndNothingAfterStop) {
  c10::NoGradGuard no_grad;
  const at::Tensor a = at::ones({8});
  OpCount count;
  std::thread worker([&] {
    for (int i = 0; i < 5; ++i) (void)at::neg(a);
  });
  worker.join();
  (void)at::neg(a);
  count.stop();
  (void)at::neg(a);
  EXPECT_EQ(count.dispatched(), 6);
  EXPECT_TRUE(count.top(10).empty());  // not by_name
  OpCount next;                        // a fresh count starts at zero
  next.stop();
  EXPECT_EQ(next.dispatched(), 0);
  EXPECT_EQ(count.dispatched(), 0);  // the counts are process-wide: the newest OpCount's
}

}  // namespace
}  // namespace mtp::bench
