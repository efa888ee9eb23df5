#include "harness/collectives/collectives.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/common/error.h"

namespace mtp::collectives {

using transport::CollectiveOp;
using transport::MessageTag;

bool Group::contains(int rank) const {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

int Group::index_of(int rank) const {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  MTP_INTERNAL_ASSERT(it != ranks.end(), fmt::format("rank {} is not a member of {} (ranks [{}])",
                                                     rank, name, fmt::join(ranks, ", ")));
  return static_cast<int>(it - ranks.begin());
}

uint64_t Group::id() const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a offset basis
  for (int r : ranks) {
    const auto v = static_cast<uint32_t>(r);
    for (int byte = 0; byte < 4; ++byte) {
      h ^= (v >> (8 * byte)) & 0xffu;
      h *= 0x100000001b3ull;  // FNV prime
    }
  }
  for (int byte = 0; channel != 0 && byte < 8; ++byte) {
    h ^= (channel >> (8 * byte)) & 0xffu;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::pair<int64_t, int64_t> shard_range(int64_t numel, int parts, int index) {
  MTP_INTERNAL_ASSERT(parts >= 1 && index >= 0 && index < parts,
                      fmt::format("shard {} of {}", index, parts));
  return {numel * index / parts, numel * (index + 1) / parts};
}

Communicator::Communicator(transport::Transport& transport, int rank)
    : tr_(transport), rank_(rank) {
  MTP_INTERNAL_ASSERT(
      rank >= 0 && rank < transport.world_size(),
      fmt::format("rank {} outside the transport's world of {}", rank, transport.world_size()));
}

void Communicator::send(int dst, const at::Tensor& t) {
  const int64_t seq = sent_to_[dst]++;
  tr_.send(rank_, dst, MessageTag::collective(CollectiveOp::kPointToPoint, 0, seq, 0), t);
}

at::Tensor Communicator::recv(int src, const std::vector<int64_t>& shape) {
  const int64_t seq = received_from_[src]++;
  return tr_.recv(rank_, src, MessageTag::collective(CollectiveOp::kPointToPoint, 0, seq, 0),
                  shape);
}

int64_t Communicator::next_sequence(const Group& group) {
  MTP_INTERNAL_ASSERT(group.contains(rank_),
                      fmt::format("rank {} runs a collective of {} "
                                  "(ranks [{}]) without being a member",
                                  rank_, group.name, fmt::join(group.ranks, ", ")));
  return group_calls_[group.ranks]++;
}

void Communicator::note(const Group& group, const char* what) {
  tr_.note(rank_,
           fmt::format("{} in {} (ranks [{}])", what, group.name, fmt::join(group.ranks, ", ")));
}

void Communicator::all_reduce_sum(const Group& group, at::Tensor& t) {
  MTP_INTERNAL_ASSERT(t.is_contiguous(), "all_reduce_sum needs a contiguous tensor");
  if (group.size() == 1) {
    next_sequence(group);
    return;
  }
  at::Tensor flat = t.view({-1});
  at::Tensor shard = reduce_scatter_sum(group, flat);
  flat.copy_(all_gather(group, shard, flat.numel()));
}

at::Tensor Communicator::reduce_scatter_sum(const Group& group, const at::Tensor& t) {
  const int64_t seq = next_sequence(group);
  const int n = group.size();
  const int me = group.index_of(rank_);
  const at::Tensor flat = t.contiguous().view({-1});
  const int64_t numel = flat.numel();
  note(group, "reduce_scatter");
  // Send every other member its shard of this member's input, then reduce this member's shard.
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    const auto [b, e] = shard_range(numel, n, j);
    tr_.send(rank_, group.ranks[j],
             MessageTag::collective(CollectiveOp::kReduceScatter, group.id(), seq, me),
             flat.slice(0, b, e));
  }
  const auto [b, e] = shard_range(numel, n, me);
  at::Tensor acc;
  for (int i = 0; i < n; ++i) {
    at::Tensor part =
        i == me ? flat.slice(0, b, e)
                : tr_.recv(rank_, group.ranks[i],
                           MessageTag::collective(CollectiveOp::kReduceScatter, group.id(), seq, i),
                           {e - b});
    if (i == 0) {
      acc = part.clone();
    } else {
      acc.add_(part);  // one IEEE add per element, members in ascending order
    }
  }
  return acc;
}

at::Tensor Communicator::all_gather(const Group& group, const at::Tensor& shard, int64_t numel) {
  const int64_t seq = next_sequence(group);
  const int n = group.size();
  const int me = group.index_of(rank_);
  const auto [mb, me_end] = shard_range(numel, n, me);
  MTP_INTERNAL_ASSERT(shard.numel() == me_end - mb,
                      fmt::format("all_gather: member {} holds {} elements, its shard of {} over "
                                  "{} members has {}",
                                  me, shard.numel(), numel, n, me_end - mb));
  note(group, "all_gather");
  const at::Tensor mine = shard.contiguous().view({-1});
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    tr_.send(rank_, group.ranks[j],
             MessageTag::collective(CollectiveOp::kAllGather, group.id(), seq, me), mine);
  }
  at::Tensor out = at::empty({numel}, shard.options());
  for (int i = 0; i < n; ++i) {
    const auto [b, e] = shard_range(numel, n, i);
    if (i == me) {
      out.slice(0, b, e).copy_(mine);
    } else {
      out.slice(0, b, e).copy_(
          tr_.recv(rank_, group.ranks[i],
                   MessageTag::collective(CollectiveOp::kAllGather, group.id(), seq, i), {e - b}));
    }
  }
  return out;
}

void Communicator::broadcast(const Group& group, int root, at::Tensor& t) {
  const int64_t seq = next_sequence(group);
  const int r = group.index_of(root);
  note(group, "broadcast");
  const auto tag = MessageTag::collective(CollectiveOp::kBroadcast, group.id(), seq, r);
  if (rank_ == root) {
    for (int dst : group.ranks) {
      if (dst != root) tr_.send(rank_, dst, tag, t);
    }
  } else {
    t.copy_(tr_.recv(rank_, root, tag, t.sizes().vec()));
  }
}

std::vector<at::Tensor> Communicator::gather(const Group& group, int root, const at::Tensor& t,
                                             const std::vector<std::vector<int64_t>>& shapes) {
  const int64_t seq = next_sequence(group);
  const int me = group.index_of(rank_);
  group.index_of(root);
  note(group, "gather");
  std::vector<at::Tensor> out;
  if (rank_ != root) {
    tr_.send(rank_, root, MessageTag::collective(CollectiveOp::kGather, group.id(), seq, me), t);
    return out;
  }
  MTP_INTERNAL_ASSERT(shapes.empty() || static_cast<int>(shapes.size()) == group.size(),
                      "gather: one shape per member");
  for (int i = 0; i < group.size(); ++i) {
    if (group.ranks[i] == root) {
      out.push_back(t);
      continue;
    }
    out.push_back(tr_.recv(rank_, group.ranks[i],
                           MessageTag::collective(CollectiveOp::kGather, group.id(), seq, i),
                           shapes.empty() ? t.sizes().vec() : shapes[i]));
  }
  return out;
}

std::vector<at::Tensor> Communicator::all_to_all(
    const Group& group, const std::vector<at::Tensor>& parts,
    const std::vector<std::vector<int64_t>>& recv_shapes) {
  const int64_t seq = next_sequence(group);
  const int n = group.size();
  const int me = group.index_of(rank_);
  MTP_INTERNAL_ASSERT(
      static_cast<int>(parts.size()) == n && static_cast<int>(recv_shapes.size()) == n,
      fmt::format("all_to_all in {}: {} parts and {} receive shapes for {} members", group.name,
                  parts.size(), recv_shapes.size(), n));
  note(group, "all_to_all");
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    tr_.send(rank_, group.ranks[j],
             MessageTag::collective(CollectiveOp::kAllToAll, group.id(), seq, me),
             parts[j].contiguous());
  }
  std::vector<at::Tensor> out;
  out.reserve(parts.size());
  for (int i = 0; i < n; ++i) {
    out.push_back(
        i == me ? parts[i]
                : tr_.recv(rank_, group.ranks[i],
                           MessageTag::collective(CollectiveOp::kAllToAll, group.id(), seq, i),
                           recv_shapes[i]));
  }
  return out;
}

}  // namespace mtp::collectives
