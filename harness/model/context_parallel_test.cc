// Tests of context parallelism (context_parallel.h) with CP ranks as threads over the in-process
// transport: the load-balanced split against hand-written positions, gather and roll against
// the whole sequence's, the K/V gather's backward against a closed-form sum, and a transformer
// layer on s/CP tokens per rank against the same layer on the whole sequence (float64 forward
// bitwise, backward to rounding: the weight grads are sums over tokens in another order).
#include "harness/model/context_parallel.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "harness/collectives/testing/rank_threads.h"
#include "harness/model/layers.h"
#include "harness/model/mtp.h"
#include "harness/model/params.h"
#include "harness/transport/transport.h"

namespace mtp::model {
namespace {

/// Runs body(cp) on `n` threads, one ContextParallel per CP rank of one group {0 .. n−1}.
void run_cp(int n, const std::function<void(ContextParallel&)>& body) {
  collectives::testing::run_rank_threads(n, [&](int, collectives::Communicator& comm) {
    ContextParallel cp(comm, collectives::testing::first_ranks("context-parallel group", n));
    body(cp);
  });
}

std::vector<int64_t> as_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

TEST(ContextParallelTest, PositionsAreMegatronsLoadBalancedChunks) {
  // CP = 2, s = 8: chunks [0 1][2 3][4 5][6 7]; rank 0 holds chunks 0 and 3, rank 1 chunks 1, 2.
  std::vector<std::vector<int64_t>> seen2(2), seen3(3);
  run_cp(2, [&](ContextParallel& cp) { seen2[cp.rank()] = as_vector(cp.positions(8)); });
  EXPECT_EQ(seen2[0], (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(seen2[1], (std::vector<int64_t>{2, 3, 4, 5}));
  run_cp(3, [&](ContextParallel& cp) { seen3[cp.rank()] = as_vector(cp.positions(12)); });
  EXPECT_EQ(seen3[0], (std::vector<int64_t>{0, 1, 10, 11}));
  EXPECT_EQ(seen3[1], (std::vector<int64_t>{2, 3, 8, 9}));
  EXPECT_EQ(seen3[2], (std::vector<int64_t>{4, 5, 6, 7}));
}

TEST(ContextParallelTest, ShardThenGatherIsTheWholeSequence) {
  for (int n : {1, 2, 3}) {
    const at::Tensor full = at::arange(2 * 12 * 5, at::kFloat).view({2, 12, 5}) * 0.5f;
    run_cp(n, [&](ContextParallel& cp) {
      const at::Tensor mine = cp.shard(full, 1);
      EXPECT_EQ(mine.size(1), 12 / n);
      EXPECT_TRUE(at::equal(cp.gather_sequence(mine, 1), full)) << "CP " << n;
    });
  }
}

TEST(ContextParallelTest, RollLeftCrossesChunkAndRankBoundaries) {
  // Token ids 1 .. 24 in two rows: after the roll each shard must be the shard of the rolled
  // whole sequence (the last global position 0), including the slots refilled from other ranks.
  const at::Tensor ids = at::arange(1, 25, at::kLong).view({2, 12});
  const at::Tensor rolled = roll_left(ids);
  for (int n : {2, 3}) {
    run_cp(n, [&](ContextParallel& cp) {
      at::Tensor mine = cp.roll_left(cp.shard(ids, 1));
      EXPECT_TRUE(at::equal(mine, cp.shard(rolled, 1))) << "CP " << n << " rank " << cp.rank();
      // Twice, as depth 2 does.
      mine = cp.roll_left(mine);
      EXPECT_TRUE(at::equal(mine, cp.shard(roll_left(rolled), 1)));
    });
  }
}

TEST(ContextParallelTest, AllGatherBackwardSumsEveryMembersGradient) {
  // Member m weights the gathered sequence by (m + 1)·base, so the gradient of each rank's own
  // rows is Σ_m (m + 1)·base[rows] = n(n + 1)/2 · base[rows] (small integers: exact).
  const int64_t S = 12;
  const at::Tensor base = at::arange(S * 3, at::kDouble).view({S, 3});
  for (int n : {2, 3}) {
    run_cp(n, [&](ContextParallel& cp) {
      at::Tensor x = cp.shard(at::zeros({S, 3}, at::kDouble), 0).clone().set_requires_grad(true);
      const at::Tensor y = cp.all_gather_sequence(x);
      ASSERT_EQ(y.size(0), S);
      (y * base * static_cast<double>(cp.rank() + 1)).sum().backward();
      const at::Tensor want = cp.shard(base, 0) * static_cast<double>(n * (n + 1) / 2);
      EXPECT_TRUE(at::equal(x.grad(), want)) << "CP " << n << " rank " << cp.rank();
    });
  }
}

/// A transformer layer on s/CP = 16 tokens per rank (CP = 2) against the same layer on the
/// whole sequence, forward and backward, on `device`. Bitwise forward where `bitwise` (float64
/// on the CPU); else to rounding, since a GEMM's rows may round differently with 32 rows than
/// with 64 (LibTorch's float32 CPU GEMM, cuBLAS). The split, gather, mask and roll are exact.
void check_layer_on_shards(at::ScalarType dtype, at::Device device, bool bitwise) {
  const double tol = dtype == at::kDouble ? 1e-12 : 1e-5;
  config::ModelConfig cfg;
  // The scenarios' sizes: every product in attention is at least 400 multiply-adds per matrix,
  // so LibTorch's CPU bmm takes BLAS at CP = 1 and at CP = 2 (below that it switches to a loop
  // of its own, whose sums round differently: the rows would not be the same bits).
  cfg.hidden_size = 64;
  cfg.num_attention_heads = 4;
  cfg.num_query_groups = 2;
  cfg.ffn_hidden_size = 128;
  cfg.seq_length = 32;
  ParamTable params;
  for (const auto& spec : config::parameter_specs(cfg)) {
    if (spec.name.rfind("decoder.layers.0.", 0) == 0) {
      params.add(spec.name, initial_value(spec, 11).to(dtype).to(device));
    }
  }
  const at::Tensor x = at::randn({32, 2, 64}, at::TensorOptions().dtype(dtype)).to(device);
  // The whole sequence on one rank, forward and backward.
  ParamTable whole_params;
  for (const auto& [name, t] : params.entries()) {
    whole_params.add(name, t.clone().set_requires_grad(true));
  }
  const at::Tensor xw = x.clone().set_requires_grad(true);
  const at::Tensor yw =
      transformer_layer(xw, LayerWeights::from(whole_params, "decoder.layers.0.", cfg, false), cfg,
                        chunk_rope_tables(cfg, dtype, device, {}));
  const at::Tensor dy = at::randn(yw.sizes(), yw.options());
  (yw * dy).sum().backward();
  const int n = 2;
  std::vector<at::Tensor> qkv_grads(n);
  run_cp(n, [&](ContextParallel& cp) {
    ParamTable mine;
    for (const auto& [name, t] : params.entries())
      mine.add(name, t.clone().set_requires_grad(true));
    const at::Tensor xl = cp.shard(x, 0).set_requires_grad(true);
    const at::Tensor yl =
        transformer_layer(xl, LayerWeights::from(mine, "decoder.layers.0.", cfg, false), cfg,
                          chunk_rope_tables(cfg, dtype, device, {&cp, nullptr}));
    if (bitwise) {
      EXPECT_TRUE(at::equal(yl, cp.shard(yw, 0))) << "rank " << cp.rank();
    } else {
      EXPECT_TRUE(at::allclose(yl, cp.shard(yw, 0), tol, tol)) << "rank " << cp.rank();
    }
    // Every CP rank's backward at once: on CUDA the K/V reduce-scatter must not wait on the
    // autograd thread the rank threads share (context_parallel.h).
    (yl * cp.shard(dy, 0)).sum().backward();
    // Input grads: this rank's rows of the whole sequence's (K/V grads summed over members).
    EXPECT_TRUE(at::allclose(xl.grad(), cp.shard(xw.grad(), 0), tol, tol));
    qkv_grads[static_cast<size_t>(cp.rank())] =
        mine.get("decoder.layers.0.self_attention.linear_qkv.weight").grad();
  });
  // Weight grads: the members' sums add up to the whole sequence's (to rounding).
  const at::Tensor want =
      whole_params.get("decoder.layers.0.self_attention.linear_qkv.weight").grad();
  EXPECT_TRUE(at::allclose(qkv_grads[0] + qkv_grads[1], want, tol, tol));
  EXPECT_FALSE(at::allclose(qkv_grads[0], want, 1e-3, 1e-3));  // each member holds a part only
}

class ContextParallelLayerTest : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(ContextParallelLayerTest, TransformerLayerOnShardsMatchesTheWholeSequence) {
  check_layer_on_shards(GetParam(), at::Device(at::kCPU), GetParam() == at::kDouble);
}

TEST(ContextParallelCudaTest, TransformerLayerOnShardsWithRankThreadsOnOneGpu_CUDA) {
  if (!at::hasCUDA()) GTEST_SKIP() << "needs a CUDA build and a GPU";
  check_layer_on_shards(at::kDouble, at::Device(at::kCUDA, 0), false);
  check_layer_on_shards(at::kFloat, at::Device(at::kCUDA, 0), false);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ContextParallelLayerTest,
                         ::testing::Values(at::kDouble, at::kFloat),
                         [](const ::testing::TestParamInfo<at::ScalarType>& info) {
                           return std::string(c10::toString(info.param));
                         });

}  // namespace
}  // namespace mtp::model
