// fan_out (harness/model/fan_out.h): the aliases are x's storage, and x's gradient is the sum of
// the slots' gradients in slot order whatever order the engine reaches the consumers in. The
// values are chosen so that order shows in the bits: 1 + 2⁻⁵³ rounds to 1 (ties to even), so
// (1 + 2⁻⁵³) + 2⁻⁵³ = 1 while (2⁻⁵³ + 2⁻⁵³) + 1 = 1 + 2⁻⁵²; a control without fan_out shows that
// the consumers' creation order changes plain accumulation's bits.
#include "harness/model/fan_out.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "harness/common/error.h"

namespace mtp::model {
namespace {

constexpr double kTiny = 1.1102230246251565e-16;  // 2⁻⁵³

uint64_t bits(double v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

at::Tensor leaf() { return at::ones({3}, at::kDouble).requires_grad_(true); }

/// x's gradient when slot i's consumer is sum(alias_i · scale[i]), the consumers built in
/// `order`; with `use_fan_out` off every consumer reads x itself.
double gradient(const std::array<int, 3>& order, const std::array<double, 3>& scale,
                bool use_fan_out) {
  at::Tensor x = leaf();
  const std::vector<at::Tensor> uses = use_fan_out ? fan_out(x, 3) : std::vector<at::Tensor>(3, x);
  at::Tensor loss;
  for (int slot : order) {
    at::Tensor term = (uses[static_cast<size_t>(slot)] * scale[static_cast<size_t>(slot)]).sum();
    loss = loss.defined() ? loss + term : term;
  }
  loss.backward();
  return x.grad()[1].item<double>();
}

TEST(FanOutTest, AliasesShareStorageAndValues) {
  at::Tensor x = at::arange(6, at::kDouble).view({2, 3}).requires_grad_(true);
  const std::vector<at::Tensor> uses = fan_out(x, 4);
  ASSERT_EQ(uses.size(), 4u);
  for (const at::Tensor& u : uses) {
    EXPECT_EQ(u.data_ptr(), x.data_ptr());
    EXPECT_EQ(u.sizes(), x.sizes());
    EXPECT_TRUE(u.requires_grad());
    EXPECT_TRUE(at::equal(u, x));
  }
}

TEST(FanOutTest, GradientIsTheSumInSlotOrderWhateverTheConsumerOrder) {
  const std::array<double, 3> scale = {1.0, kTiny, kTiny};
  std::array<int, 3> order = {0, 1, 2};
  std::vector<uint64_t> plain;
  do {
    EXPECT_EQ(bits(gradient(order, scale, true)), bits(1.0))
        << "consumers built in order " << order[0] << order[1] << order[2];
    plain.push_back(bits(gradient(order, scale, false)));
  } while (std::next_permutation(order.begin(), order.end()));
  // The control: without fan_out the consumer order reaches the bits (else the check is void).
  EXPECT_NE(std::count(plain.begin(), plain.end(), bits(1.0)), 0);
  EXPECT_NE(std::count(plain.begin(), plain.end(), bits(1.0 + 2 * kTiny)), 0);
}

TEST(FanOutTest, SlotOrderIsTheCallersChoice) {
  // The same three gradients with the small ones first: (2⁻⁵³ + 2⁻⁵³) + 1 = 1 + 2⁻⁵².
  const std::array<double, 3> scale = {kTiny, kTiny, 1.0};
  EXPECT_EQ(bits(gradient({2, 1, 0}, scale, true)), bits(1.0 + 2 * kTiny));
  EXPECT_EQ(bits(gradient({0, 1, 2}, scale, true)), bits(1.0 + 2 * kTiny));
}

TEST(FanOutTest, UnusedSlotsAddNothingNotEvenPlusZero) {
  // One slot used with gradient −0: the sum keeps the sign (−0 + 0 would give +0).
  at::Tensor x = leaf();
  const std::vector<at::Tensor> uses = fan_out(x, 3);
  (uses[1] * -0.0).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(std::signbit(x.grad()[0].item<double>()));
}

TEST(FanOutTest, WithoutGradientItReturnsTheTensorAndRefusesNoUses) {
  const at::Tensor x = at::ones({2}, at::kFloat);
  for (const at::Tensor& u : fan_out(x, 2)) EXPECT_TRUE(u.is_same(x));
  EXPECT_THROW(fan_out(x, 0), mtp::InternalError);
}

}  // namespace
}  // namespace mtp::model
