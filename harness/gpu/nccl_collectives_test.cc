// Collectives over the NCCL transport against the in-process transport: the same inputs, group
// sizes 2..min(#GPUs, 4), odd tensor sizes, bitwise equal results. One thread per GPU, each with
// its own NCCL transport (the --launcher threads mode). Needs a CUDA build and two GPUs: NCCL
// does not put two ranks of one communicator on one GPU, so a one-GPU machine skips it.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "harness/collectives/collectives.h"
#include "harness/gpu/gpu.h"

namespace mtp::gpu {
namespace {

at::Tensor input(int member, int64_t numel, const at::Device& device) {
  std::vector<float> v(numel);
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(member + 1);
  for (int64_t e = 0; e < numel; ++e) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(x >> 11) * 0x1.0p-53;
    v[e] = static_cast<float>(((x >> 7) & 1 ? -1 : 1) * std::pow(10.0, 8.0 * u - 4.0));
  }
  return at::from_blob(v.data(), {numel}, at::kFloat).clone().to(device);
}

using Results = std::vector<std::vector<at::Tensor>>;  // [rank][collective]

/// Every collective of the test on rank r: all_reduce, reduce_scatter, all_gather, broadcast.
std::vector<at::Tensor> run_collectives(collectives::Communicator& comm, int n, int r,
                                        const at::Device& device) {
  std::vector<at::Tensor> out;
  collectives::Group g{"world", {}};
  for (int i = 0; i < n; ++i) g.ranks.push_back(i);
  for (int64_t numel : {1, 13, 101, 4099}) {
    at::Tensor t = input(r, numel, device);
    comm.all_reduce_sum(g, t);
    out.push_back(t.cpu());
    out.push_back(comm.reduce_scatter_sum(g, input(r, numel, device)).cpu());
    const auto [b, e] = collectives::shard_range(numel, n, r);
    out.push_back(comm.all_gather(g, input(r, numel, device).slice(0, b, e), numel).cpu());
    at::Tensor c = input(r, numel, device);
    comm.broadcast(g, n - 1, c);
    out.push_back(c.cpu());
  }
  return out;
}

Results on_threads(int n, const std::function<std::vector<at::Tensor>(int)>& body) {
  Results results(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        results[r] = body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return results;
}

TEST(NcclCollectivesTest, MatchInProcessBitwise_MultiGPU) {
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (!cuda_build() || gpus < 2) {
    GTEST_SKIP() << "needs a CUDA build and 2 GPUs (NCCL puts one rank per GPU); found " << gpus;
  }
  for (int n = 2; n <= std::min(gpus, 4); ++n) {
    auto in_process = transport::make_in_process_transport(n, {});
    const Results want = on_threads(n, [&](int r) {
      set_current_device(0);
      collectives::Communicator comm(*in_process, r);
      return run_collectives(comm, n, r, at::Device(at::kCUDA, 0));
    });
    const Results got = on_threads(n, [&](int r) {
      set_current_device(r);
      LaunchEnv env;
      env.rank = r;
      env.world_size = n;
      env.local_rank = r;
      env.master_port = 29700 + n;
      auto nccl = make_nccl_transport(env, r, std::chrono::milliseconds(60000));
      collectives::Communicator comm(*nccl, r);
      return run_collectives(comm, n, r, at::Device(at::kCUDA, r));
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(want[r].size(), got[r].size());
      for (size_t k = 0; k < want[r].size(); ++k) {
        ASSERT_EQ(want[r][k].sizes(), got[r][k].sizes());
        EXPECT_EQ(std::memcmp(want[r][k].data_ptr(), got[r][k].data_ptr(), want[r][k].nbytes()), 0)
            << "group size " << n << ", rank " << r << ", collective " << k;
      }
    }
  }
}

}  // namespace
}  // namespace mtp::gpu
