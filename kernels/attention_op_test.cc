// kernels::causal_attention (the harness's attention op, kernels/ops.h) through LibTorch on the
// CPU: its forward and autograd against the unfused composite's (masked softmax, LibTorch
// autograd) in float64, fp32 and bf16 within stated bounds, bitwise repeatability and batch
// invariance through the op, the model's self-attention (RoPE, GQA) with attention_backend =
// "harness" against "unfused" in float64, and the c10::Error for bad inputs. The kernels' own
// battery is cpu/attention_cpu_test.cc (CPU) and cuda/kernels_cuda_test.cc (GPU, the CPU's bits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "harness/config/model_config.h"
#include "harness/model/layers.h"
#include "kernels/ops.h"

namespace mtp::kernels {
namespace {

/// The composite: softmax(q·kᵀ·scale with −∞ above the diagonal)·v, in q's dtype.
at::Tensor composite(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  const int64_t s = q.size(2);
  const at::Tensor future = at::ones({s, s}, at::TensorOptions().dtype(at::kBool)).triu(1);
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  return at::matmul(at::softmax(scores.masked_fill(future, -INFINITY), -1), v);
}

struct Grads {
  at::Tensor out, dq, dk, dv;
};

/// Forward and q, k, v gradients of `fn` for the upstream gradient `g`.
template <typename Fn>
Grads run(const Fn& fn, const at::Tensor& q0, const at::Tensor& k0, const at::Tensor& v0,
          const at::Tensor& g) {
  at::Tensor q = q0.detach().clone().requires_grad_(true);
  at::Tensor k = k0.detach().clone().requires_grad_(true);
  at::Tensor v = v0.detach().clone().requires_grad_(true);
  at::Tensor out = fn(q, k, v);
  out.backward(g);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

/// max |got − ref| / max |ref|.
double relative_error(const at::Tensor& got, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kDouble);
  return (got.to(at::kDouble) - r).abs().max().item<double>() / r.abs().max().item<double>();
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

struct Inputs {
  at::Tensor q, k, v, g;
  double scale;
};
Inputs inputs(int64_t b, int64_t heads, int64_t s, int64_t hn, uint64_t seed) {
  at::manual_seed(seed);
  const auto opt = at::TensorOptions().dtype(at::kDouble);
  return {1.5 * at::randn({b, heads, s, hn}, opt), 1.5 * at::randn({b, heads, s, hn}, opt),
          at::randn({b, heads, s, hn}, opt), at::randn({b, heads, s, hn}, opt),
          1.0 / std::sqrt(static_cast<double>(hn))};
}

// Bounds, as max |error| / max |reference| per tensor (measured on this problem: fp64 ≤ 9.4e-16,
// fp32 ≤ 5.0e-7, bf16 ≤ 2.9e-3): float64 1e-14 (both sides carry ~1e-16 roundings through sums of
// ≤ 40 terms); fp32 2e-6; bf16 4.5e-3 against the float64 result on the same bf16 inputs: an
// output rounded to bf16 is off by at most half its ulp, 2^-8 = 3.9e-3 of the largest element,
// plus the fp32 sums (the probabilities are never rounded to bf16).
TEST(CausalAttentionOpTest, MatchesTheCompositeAndItsAutogradInEveryDtype) {
  const Inputs in = inputs(2, 3, 37, 8, 11);
  const auto op = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return causal_attention(q, k, v, in.scale);
  };
  const auto ref = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return composite(q, k, v, in.scale);
  };
  for (const auto& [dtype, bound] : {std::pair{at::kDouble, 1e-14}, std::pair{at::kFloat, 2e-6},
                                     std::pair{at::kBFloat16, 4.5e-3}}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor q = in.q.to(dtype), k = in.k.to(dtype), v = in.v.to(dtype), g = in.g.to(dtype);
    const Grads got = run(op, q, k, v, g);
    EXPECT_EQ(got.out.scalar_type(), dtype);
    EXPECT_EQ(got.dq.scalar_type(), dtype);
    // The reference: the composite in float64 on the same (rounded) inputs.
    const Grads want =
        run(ref, q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), g.to(at::kDouble));
    EXPECT_LE(relative_error(got.out, want.out), bound);
    EXPECT_LE(relative_error(got.dq, want.dq), bound);
    EXPECT_LE(relative_error(got.dk, want.dk), bound);
    EXPECT_LE(relative_error(got.dv, want.dv), bound);
  }
}

TEST(CausalAttentionOpTest, RepeatableAndBatchInvariant) {
  const Inputs in = inputs(4, 2, 23, 6, 12);
  const auto op = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return causal_attention(q, k, v, in.scale);
  };
  const at::Tensor q = in.q.to(at::kBFloat16), k = in.k.to(at::kBFloat16);
  const at::Tensor v = in.v.to(at::kBFloat16), g = in.g.to(at::kBFloat16);
  const Grads a = run(op, q, k, v, g), b = run(op, q, k, v, g);
  EXPECT_TRUE(same_bits(a.out, b.out) && same_bits(a.dq, b.dq) && same_bits(a.dk, b.dk) &&
              same_bits(a.dv, b.dv));
  for (int64_t i = 0; i < 4; ++i) {
    SCOPED_TRACE("sample " + std::to_string(i));
    const auto one = [&](const at::Tensor& t) { return t.narrow(0, i, 1); };
    const Grads alone = run(op, one(q), one(k), one(v), one(g));
    EXPECT_TRUE(same_bits(alone.out, one(a.out)));
    EXPECT_TRUE(same_bits(alone.dq, one(a.dq)));
    EXPECT_TRUE(same_bits(alone.dk, one(a.dk)));
    EXPECT_TRUE(same_bits(alone.dv, one(a.dv)));
  }
  // Strided inputs (the model passes permuted views) give the contiguous inputs' bits.
  const at::Tensor qt = q.transpose(1, 2).contiguous().transpose(1, 2);
  EXPECT_FALSE(qt.is_contiguous());
  EXPECT_TRUE(same_bits(run(op, qt, k, v, g).dq, a.dq));
}

TEST(CausalAttentionOpTest, ModelSelfAttentionWithItEqualsTheUnfusedOneInFloat64) {
  // The tiny model's attention shape with GQA (4 heads over 2 KV groups) and a batch of 3.
  config::ModelConfig cfg;
  cfg.hidden_size = 64;
  cfg.num_attention_heads = 4;
  cfg.num_query_groups = 2;
  cfg.seq_length = 32;
  const int64_t h = cfg.hidden_size, hn = cfg.kv_channels(), s = cfg.seq_length, b = 3;
  at::manual_seed(21);
  const auto opt = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor x0 = at::randn({s, b, h}, opt);
  const at::Tensor qkv0 = 0.2 * at::randn({2 * (2 + 2) * hn, h}, opt);
  const at::Tensor proj0 = 0.2 * at::randn({h, 4 * hn}, opt);
  const at::Tensor g = at::randn({s, b, h}, opt);
  const model::RopeTables rope = model::rope_tables(s, hn, cfg.rotary_base, at::kDouble);
  std::vector<at::Tensor> grads[2];
  at::Tensor outs[2];
  for (int i = 0; i < 2; ++i) {
    cfg.attention_backend =
        i == 0 ? config::AttentionBackend::kUnfused : config::AttentionBackend::kHarness;
    at::Tensor x = x0.clone().requires_grad_(true);
    model::LayerWeights w;
    w.linear_qkv = qkv0.clone().requires_grad_(true);
    w.linear_proj = proj0.clone().requires_grad_(true);
    outs[i] = model::self_attention(x, w, cfg, rope);
    outs[i].backward(g);
    grads[i] = {x.grad(), w.linear_qkv.grad(), w.linear_proj.grad()};
  }
  EXPECT_LE(relative_error(outs[1], outs[0]), 1e-14);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_LE(relative_error(grads[1][k], grads[0][k]), 1e-14) << "gradient " << k;
  }
  EXPECT_FALSE(same_bits(outs[1], outs[0]));  // the switch reaches the model
}

TEST(CausalAttentionOpTest, BadInputsThrow) {
  const at::Tensor q = at::randn({1, 2, 5, 4});
  EXPECT_THROW(causal_attention(q, q.narrow(2, 0, 4), q, 0.5), c10::Error);
  EXPECT_THROW(causal_attention(q.view({2, 5, 4}), q.view({2, 5, 4}), q.view({2, 5, 4}), 0.5),
               c10::Error);
  EXPECT_THROW(causal_attention(q, q.to(at::kDouble), q, 0.5), c10::Error);
  EXPECT_THROW(causal_attention(q.to(at::kHalf), q.to(at::kHalf), q.to(at::kHalf), 0.5),
               c10::Error);
  EXPECT_THROW(causal_attention(q, q, q, std::numeric_limits<double>::quiet_NaN()), c10::Error);
  try {
    causal_attention(q, q, q.to(at::kDouble), 0.5);
    ADD_FAILURE() << "no error for mixed dtypes";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("one dtype"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mtp::kernels
