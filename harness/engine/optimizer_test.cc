// Tests of adam_update: the per-element arithmetic the plain and the distributed optimizer share.
// Updating a tensor in shards at arbitrary offsets (what a data-parallel rank of Megatron's
// distributed optimizer does) gives the bits of updating it whole, over several steps, with and
// without weight decay; and one element is checked against the formula evaluated here in float.
#include "harness/engine/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace mtp::engine {
namespace {

at::Tensor pseudo_random(int64_t n, uint64_t seed, double scale) {
  std::vector<float> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<float>(scale * (static_cast<double>(x >> 11) * 0x1.0p-53 - 0.5));
  }
  return at::from_blob(v.data(), {n}, at::kFloat).clone();
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(OptimizerTest, ShardedAdamGivesTheBitsOfWholeAdam) {
  for (double wd : {0.0, 0.1}) {
    const int64_t n = 1037;  // not a multiple of any vector width
    AdamHyper h{1e-3, 0.9, 0.95, 1e-8, wd};
    at::Tensor w = pseudo_random(n, 1, 0.2), m = at::zeros({n}), v = at::zeros({n});
    at::Tensor ws = w.clone(), ms = m.clone(), vs = v.clone();
    // Shard boundaries at odd offsets: vectorised bodies and scalar tails fall elsewhere.
    const std::vector<int64_t> cuts = {0, 3, 64, 65, 517, 1000, 1037};
    for (int64_t step = 1; step <= 4; ++step) {
      const at::Tensor g = pseudo_random(n, 10 + step, 1e-2);
      adam_update(w, g, m, v, step, h);
      for (size_t k = 0; k + 1 < cuts.size(); ++k) {
        at::Tensor a = ws.slice(0, cuts[k], cuts[k + 1]);
        at::Tensor b = ms.slice(0, cuts[k], cuts[k + 1]);
        at::Tensor c = vs.slice(0, cuts[k], cuts[k + 1]);
        adam_update(a, g.slice(0, cuts[k], cuts[k + 1]), b, c, step, h);
      }
      ASSERT_TRUE(same_bits(w, ws)) << "weights, step " << step << ", wd " << wd;
      ASSERT_TRUE(same_bits(m, ms)) << "exp_avg, step " << step;
      ASSERT_TRUE(same_bits(v, vs)) << "exp_avg_sq, step " << step;
    }
  }
}

TEST(OptimizerTest, FirstStepMatchesTheFormula) {
  // Step 1: m = (1−β1)·g, v = (1−β2)·g², u = (m/(1−β1)) / (√(v/(1−β2)) + ε) ≈ sign(g).
  AdamHyper h{1e-3, 0.9, 0.95, 1e-8, 0.0};
  at::Tensor w = at::full({3}, 0.5f), m = at::zeros({3}), v = at::zeros({3});
  const at::Tensor g = at::tensor({0.25f, -2.0f, 0.0f});
  adam_update(w, g, m, v, 1, h);
  EXPECT_FLOAT_EQ(w[0].item<float>(), 0.5f - 1e-3f);
  EXPECT_FLOAT_EQ(w[1].item<float>(), 0.5f + 1e-3f);
  EXPECT_EQ(w[2].item<float>(), 0.5f);  // g = 0: u = 0 / (0 + ε) = 0
  EXPECT_FLOAT_EQ(m[1].item<float>(), -0.2f);
  EXPECT_FLOAT_EQ(v[1].item<float>(), 0.2f);
}

}  // namespace
}  // namespace mtp::engine
