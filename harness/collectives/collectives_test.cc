// Tests of the fixed-order collectives on the in-process transport: group sizes 1–5, odd tensor
// sizes, results against sums computed here element by element in ascending member order (and
// shown to differ from another order, so the order is really tested), shards, broadcast, gather,
// point-to-point order, and concurrent collectives of different groups.
#include "harness/collectives/collectives.h"

#include "harness/collectives/testing/rank_threads.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

namespace mtp::collectives {
namespace {

using testing::run_rank_threads;

/// body(rank, communicator) on `world` rank threads.
void run_ranks(int world, const std::function<void(int, Communicator&)>& body) {
  run_rank_threads(world, body);
}

/// Member i's input: pseudo-random values of both signs with magnitudes from 1e-4 to 1e4, so
/// that float sums of three or more of them depend on their order.
at::Tensor input(int member, int64_t numel) {
  std::vector<float> v(numel);
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(member + 1);
  for (int64_t e = 0; e < numel; ++e) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(x >> 11) * 0x1.0p-53;
    const double mag = std::pow(10.0, 8.0 * u - 4.0);
    v[e] = static_cast<float>((x >> 7) & 1 ? -mag : mag);
  }
  return at::from_blob(v.data(), {numel}, at::kFloat).clone();
}

/// Σ over members in the given order, one float add at a time.
std::vector<float> sum_in_order(int n, int64_t numel, const std::vector<int>& order) {
  std::vector<float> out(numel);
  for (int64_t e = 0; e < numel; ++e) {
    float acc = input(order[0], numel).data_ptr<float>()[e];
    for (size_t k = 1; k < order.size(); ++k) acc += input(order[k], numel).data_ptr<float>()[e];
    out[e] = acc;
  }
  return out;
}

std::vector<int> ascending(int n) {
  std::vector<int> o(n);
  for (int i = 0; i < n; ++i) o[i] = i;
  return o;
}

bool same_bits(const at::Tensor& t, const std::vector<float>& expect, int64_t offset = 0) {
  return std::memcmp(t.contiguous().data_ptr<float>(), expect.data() + offset,
                     t.numel() * sizeof(float)) == 0;
}

TEST(CollectivesTest, ShardRangeSplitsEvenlyWithFloorBounds) {
  EXPECT_EQ(shard_range(10, 3, 0), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(shard_range(10, 3, 1), (std::pair<int64_t, int64_t>{3, 6}));
  EXPECT_EQ(shard_range(10, 3, 2), (std::pair<int64_t, int64_t>{6, 10}));
  EXPECT_EQ(shard_range(2, 5, 0), (std::pair<int64_t, int64_t>{0, 0}));  // empty shards
  EXPECT_EQ(shard_range(2, 5, 4), (std::pair<int64_t, int64_t>{1, 2}));
}

TEST(CollectivesTest, GroupIdsAreStableAndDistinguishRankLists) {
  Group a{"a", {0, 1}}, b{"b", {1, 0}}, c{"c", {0, 1, 2}}, a2{"other name", {0, 1}};
  EXPECT_EQ(a.id(), a2.id());
  EXPECT_NE(a.id(), b.id());
  EXPECT_NE(a.id(), c.id());
  EXPECT_EQ(c.index_of(2), 2);
  EXPECT_THROW(a.index_of(5), InternalError);
}

TEST(CollectivesTest, AllReduceSumsInAscendingMemberOrderForGroupSizes1To5) {
  bool order_matters_somewhere = false;
  for (int n = 1; n <= 5; ++n) {
    for (int64_t numel : {1, 7, 13, 64, 101}) {
      const auto expect = sum_in_order(n, numel, ascending(n));
      std::vector<int> reversed = ascending(n);
      std::reverse(reversed.begin(), reversed.end());
      order_matters_somewhere =
          order_matters_somewhere || sum_in_order(n, numel, reversed) != expect;
      run_ranks(n, [&](int r, Communicator& comm) {
        Group g{"world", ascending(n)};
        at::Tensor t = input(r, numel).view({numel});
        comm.all_reduce_sum(g, t);
        EXPECT_TRUE(same_bits(t, expect)) << "n " << n << " numel " << numel << " rank " << r;
      });
    }
  }
  EXPECT_TRUE(order_matters_somewhere) << "inputs too tame: the order is not tested";
}

TEST(CollectivesTest, AllReduceFollowsTheGroupsMemberOrderNotTheRankOrder) {
  // Members listed as ranks {2, 0, 1}: member 0 is rank 2, so the sum is (x2 + x0) + x1.
  const int64_t numel = 31;
  std::vector<float> expect(numel);
  for (int64_t e = 0; e < numel; ++e) {
    float acc = input(2, numel).data_ptr<float>()[e];
    acc += input(0, numel).data_ptr<float>()[e];
    acc += input(1, numel).data_ptr<float>()[e];
    expect[e] = acc;
  }
  run_ranks(3, [&](int r, Communicator& comm) {
    Group g{"permuted", {2, 0, 1}};
    at::Tensor t = input(r, numel);
    comm.all_reduce_sum(g, t);
    EXPECT_TRUE(same_bits(t, expect)) << "rank " << r;
  });
}

TEST(CollectivesTest, ReduceScatterShardsEqualTheAllReduceBitsForGroupSizes1To5) {
  for (int n = 1; n <= 5; ++n) {
    for (int64_t numel : {1, 7, 13, 23, 101}) {  // fewer elements than members too: empty shards
      const auto expect = sum_in_order(n, numel, ascending(n));
      run_ranks(n, [&](int r, Communicator& comm) {
        Group g{"world", ascending(n)};
        at::Tensor shard = comm.reduce_scatter_sum(g, input(r, numel));
        const auto [b, e] = shard_range(numel, n, r);
        ASSERT_EQ(shard.numel(), e - b);
        EXPECT_TRUE(same_bits(shard, expect, b))
            << "n " << n << " numel " << numel << " rank " << r;
      });
    }
  }
}

TEST(CollectivesTest, AllGatherConcatenatesShardsInMemberOrderForGroupSizes1To5) {
  for (int n = 1; n <= 5; ++n) {
    for (int64_t numel : {1, 7, 17, 64}) {
      run_ranks(n, [&](int r, Communicator& comm) {
        Group g{"world", ascending(n)};
        const auto [b, e] = shard_range(numel, n, r);
        at::Tensor mine = at::arange(b, e, at::kDouble) * 0.5;
        at::Tensor full = comm.all_gather(g, mine, numel);
        EXPECT_TRUE(at::equal(full, at::arange(numel, at::kDouble) * 0.5))
            << "n " << n << " numel " << numel << " rank " << r;
      });
    }
  }
}

TEST(CollectivesTest, BroadcastAndGatherUseTheNamedRootForGroupSizes1To5) {
  for (int n = 1; n <= 5; ++n) {
    run_ranks(n, [&](int r, Communicator& comm) {
      Group g{"world", ascending(n)};
      for (int root = 0; root < n; ++root) {
        // Odd shape; every rank starts from its own values, all end with the root's bits.
        at::Tensor t = input(r, 15).view({3, 5});
        comm.broadcast(g, root, t);
        EXPECT_TRUE(at::equal(t, input(root, 15).view({3, 5}))) << "n " << n << " root " << root;
      }
      std::vector<std::vector<int64_t>> shapes;
      for (int i = 0; i < n; ++i) shapes.push_back({2 * i + 1});
      for (int root = 0; root < n; ++root) {
        auto got = comm.gather(g, root, input(r, 2 * r + 1), shapes);
        if (r == root) {
          ASSERT_EQ(got.size(), static_cast<size_t>(n));
          for (int i = 0; i < n; ++i) {
            EXPECT_TRUE(at::equal(got[i], input(i, 2 * i + 1))) << "n " << n << " member " << i;
          }
        } else {
          EXPECT_TRUE(got.empty());
        }
      }
    });
  }
}

TEST(CollectivesTest, AllToAllDeliversEveryPairsPartIncludingEmptyOnesForGroupSizes1To4) {
  // Member i sends member j (i + 2·j) mod 3 rows of width 4 (some pairs send 0 rows), values
  // tagged by (i, j); each member must receive, in member order, exactly what was addressed to it.
  auto rows = [](int i, int j) { return static_cast<int64_t>((i + 2 * j) % 3); };
  auto part = [&](int i, int j) { return input(10 * i + j, rows(i, j) * 4).view({rows(i, j), 4}); };
  for (int n = 1; n <= 4; ++n) {
    run_ranks(n, [&](int r, Communicator& comm) {
      Group g{"world", ascending(n)};
      std::vector<at::Tensor> parts;
      std::vector<std::vector<int64_t>> shapes;
      for (int j = 0; j < n; ++j) {
        parts.push_back(part(r, j));
        shapes.push_back({rows(j, r), 4});
      }
      for (int round = 0; round < 2; ++round) {  // a second call must not take the first's parts
        auto got = comm.all_to_all(g, parts, shapes);
        ASSERT_EQ(got.size(), static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) {
          EXPECT_TRUE(at::equal(got[i], part(i, r))) << "n " << n << " from " << i << " to " << r;
        }
      }
    });
  }
}

TEST(CollectivesTest, PointToPointMessagesArriveInSendOrder) {
  run_ranks(2, [&](int r, Communicator& comm) {
    if (r == 0) {
      for (int k = 0; k < 5; ++k) comm.send(1, at::full({1}, static_cast<float>(k)));
    } else {
      for (int k = 0; k < 5; ++k) EXPECT_EQ(comm.recv(0, {1}).item<float>(), k);
    }
  });
}

TEST(CollectivesTest, ConcurrentGroupsDoNotMixTheirMessages) {
  // Ranks {0,1} and {2,3} reduce in their own groups while the world group reduces too: the
  // per-group sequence numbers keep the messages apart.
  const int64_t numel = 9;
  run_ranks(4, [&](int r, Communicator& comm) {
    Group pair{"pair", r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}};
    Group world{"world", {0, 1, 2, 3}};
    for (int round = 0; round < 3; ++round) {
      at::Tensor a = at::full({numel}, static_cast<float>(r + round));
      comm.all_reduce_sum(pair, a);
      const float lo = r < 2 ? 0.f : 2.f;
      EXPECT_TRUE(at::equal(a, at::full({numel}, (lo + round) + (lo + 1 + round))));
      at::Tensor w = at::full({numel}, static_cast<float>(r));
      comm.all_reduce_sum(world, w);
      EXPECT_TRUE(at::equal(w, at::full({numel}, 6.f)));
    }
  });
}

}  // namespace
}  // namespace mtp::collectives
