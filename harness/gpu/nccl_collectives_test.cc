// Collectives over the NCCL transport against the in-process transport: the same inputs, group
// sizes 2..min(#GPUs, 4), odd tensor sizes, bitwise equal results. One thread per GPU, each with
// its own NCCL transport (the --launcher threads mode). Needs a CUDA build and two GPUs: NCCL
// does not put two ranks of one communicator on one GPU, so a one-GPU machine skips it.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
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

/// Rows of the all-to-all part member `from` sends to member `to` (0 included: an expert that
/// gets no tokens from a rank).
int64_t part_rows(int from, int to, int salt) { return (from * 7 + to * 3 + salt) % 4; }

/// One ragged all-to-all of [rows, 3] parts over `g` from member r; returns what r received,
/// concatenated in member order (a [0] tensor when nothing arrived).
at::Tensor ragged_all_to_all(collectives::Communicator& comm, const collectives::Group& g, int r,
                             int salt, const at::Device& device) {
  const int n = g.size();
  std::vector<at::Tensor> parts;
  std::vector<std::vector<int64_t>> shapes;
  for (int j = 0; j < n; ++j) {
    const int64_t rows = part_rows(r, j, salt);
    parts.push_back(input(r * 131 + j * 17 + salt, rows * 3, device).view({rows, 3}));
    shapes.push_back({part_rows(j, r, salt), 3});
  }
  std::vector<at::Tensor> flat;
  for (const at::Tensor& t : comm.all_to_all(g, parts, shapes)) flat.push_back(t.reshape({-1}));
  return at::cat(flat).cpu();
}

/// Every collective of the test on rank r: all_reduce, reduce_scatter, all_gather, broadcast,
/// gather with per-member shapes, a ragged all-to-all.
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
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 0; i < n; ++i) shapes.push_back({numel + i});
    for (const at::Tensor& t : comm.gather(g, 0, input(r, numel + r, device), shapes)) {
      out.push_back(t.cpu());
    }
    out.push_back(ragged_all_to_all(comm, g, r, static_cast<int>(numel % 5), device));
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

/// Rank r's NCCL transport among n ranks, one per GPU of this process (GPU r), rendezvous on
/// `port`, a 60 s receive timeout. Called on rank r's thread with GPU r current.
std::unique_ptr<transport::Transport> nccl_transport_of(int r, int n, int port) {
  LaunchEnv env;
  env.rank = r;
  env.world_size = n;
  env.local_rank = r;
  env.master_port = port;
  return make_nccl_transport(env, r, std::chrono::milliseconds(60000));
}

void expect_bitwise_equal(const Results& want, const Results& got, int n) {
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(want[r].size(), got[r].size());
    for (size_t k = 0; k < want[r].size(); ++k) {
      ASSERT_EQ(want[r][k].sizes(), got[r][k].sizes()) << "group size " << n << ", rank " << r;
      EXPECT_EQ(std::memcmp(want[r][k].data_ptr(), got[r][k].data_ptr(), want[r][k].nbytes()), 0)
          << "group size " << n << ", rank " << r << ", collective " << k;
    }
  }
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
      auto nccl = nccl_transport_of(r, n, 29700 + n);
      collectives::Communicator comm(*nccl, r);
      return run_collectives(comm, n, r, at::Device(at::kCUDA, r));
    });
    expect_bitwise_equal(want, got, n);
  }
}

/// Two threads of every rank, each with its own Communicator over the rank's one transport, run
/// ragged all-to-alls over the same ranks at once, told apart by the group's channel (as the
/// rank thread and the combined 1F1B side thread do with the expert-parallel group). Rank r's
/// results: thread 0's all-to-alls, then thread 1's.
Results two_threads_per_rank(int n, const std::function<transport::Transport&(int)>& transport,
                             const std::function<at::Device(int)>& device) {
  constexpr int kRounds = 24;
  return on_threads(n, [&](int r) {
    set_current_device(device(r).index());
    std::vector<std::vector<at::Tensor>> mine(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int k = 0; k < 2; ++k) {
      threads.emplace_back([&, k] {
        try {
          set_current_device(device(r).index());
          collectives::Communicator comm(transport(r), r);
          collectives::Group g{"expert-parallel group", {}, static_cast<uint64_t>(k)};
          for (int i = 0; i < n; ++i) g.ranks.push_back(i);
          for (int round = 0; round < kRounds; ++round) {
            mine[k].push_back(ragged_all_to_all(comm, g, r, round * 2 + k, device(r)));
          }
        } catch (const std::exception& e) {
          errors[k] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int k = 0; k < 2; ++k) {
      if (!errors[k].empty())
        throw std::runtime_error("thread " + std::to_string(k) + ": " + errors[k]);
    }
    mine[0].insert(mine[0].end(), mine[1].begin(), mine[1].end());
    return mine[0];
  });
}

TEST(NcclCollectivesTest, TwoThreadsOfOneRankReceiveFromOnePeerAtOnce_MultiGPU) {
  // Without one reader per channel at a time, one thread's header receive could be posted
  // between another's header and payload receives and take the payload's bytes.
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (!cuda_build() || gpus < 2) {
    GTEST_SKIP() << "needs a CUDA build and 2 GPUs (NCCL puts one rank per GPU); found " << gpus;
  }
  const int n = std::min(gpus, 4);
  auto in_process = transport::make_in_process_transport(n, {});
  const Results want = two_threads_per_rank(
      n, [&](int) -> transport::Transport& { return *in_process; },
      [](int) { return at::Device(at::kCUDA, 0); });
  std::vector<std::unique_ptr<transport::Transport>> nccl(n);
  on_threads(n, [&](int r) {
    set_current_device(r);
    nccl[r] = nccl_transport_of(r, n, 29720 + n);
    return std::vector<at::Tensor>{};
  });
  const Results got = two_threads_per_rank(
      n, [&](int r) -> transport::Transport& { return *nccl[r]; },
      [](int r) { return at::Device(at::kCUDA, r); });
  expect_bitwise_equal(want, got, n);
}

}  // namespace
}  // namespace mtp::gpu
