#include "harness/model/context_parallel.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include <utility>
#include <vector>

#include "harness/common/error.h"
#include "harness/model/mtp.h"

namespace mtp::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The member holding chunk j of 2n, and which of its two halves it is.
std::pair<int, int> chunk_owner(int j, int n) {
  return j < n ? std::pair{j, 0} : std::pair{2 * n - 1 - j, 1};
}

/// Global order from member-major order: `parts[m]` is member m's shard along dim (two halves).
at::Tensor to_global_order(const std::vector<at::Tensor>& parts, int64_t dim) {
  const int n = static_cast<int>(parts.size());
  std::vector<at::Tensor> chunks;
  for (int j = 0; j < 2 * n; ++j) {
    const auto [m, half] = chunk_owner(j, n);
    chunks.push_back(parts[static_cast<size_t>(m)].chunk(2, dim)[static_cast<size_t>(half)]);
  }
  return at::cat(chunks, dim);
}

/// Member-major order from global order along dim 0: member m's chunks m and 2n−1−m, m ascending.
at::Tensor to_member_order(const at::Tensor& global, int n) {
  const std::vector<at::Tensor> chunks = global.chunk(2 * n, 0);
  std::vector<at::Tensor> out;
  for (int m = 0; m < n; ++m) {
    out.push_back(chunks[static_cast<size_t>(m)]);
    out.push_back(chunks[static_cast<size_t>(2 * n - 1 - m)]);
  }
  return at::cat(out, 0);
}

/// The autograd node of all_gather_sequence. Its input and output live on `device` when that is
/// the CPU; for a CUDA `device` they are CPU copies and the collectives run on `device`
/// (all_gather_sequence): autograd runs a node on the thread of its inputs' device, so the
/// backward's reduce-scatter, which waits for the other CP ranks, runs on this rank's own thread
/// (as a CPU node) and never on the one autograd thread that every rank thread shares for a
/// CUDA device (where rank A's wait would block rank B's backward: a deadlock).
struct AllGatherSequence : public torch::autograd::Function<AllGatherSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& local, int64_t self,
                            int64_t device_type, int64_t device_index) {
    auto* cp = reinterpret_cast<ContextParallel*>(self);  // NOLINT: the rank's own object
    const at::Device device(static_cast<at::DeviceType>(device_type),
                            static_cast<at::DeviceIndex>(device_index));
    ctx->saved_data["self"] = self;
    ctx->saved_data["local_sizes"] = local.sizes().vec();
    ctx->saved_data["device_type"] = device_type;
    ctx->saved_data["device_index"] = device_index;
    return cp->gather_sequence(local.to(device), 0).to(local.device());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* cp = reinterpret_cast<ContextParallel*>(ctx->saved_data["self"].toInt());  // NOLINT
    const auto sizes = ctx->saved_data["local_sizes"].toIntVector();
    const at::Device device(static_cast<at::DeviceType>(ctx->saved_data["device_type"].toInt()),
                            static_cast<at::DeviceIndex>(ctx->saved_data["device_index"].toInt()));
    const at::Tensor g = grad_outputs[0];
    return {cp->reduce_scatter_sequence(g.to(device)).view(sizes).to(g.device()), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

ContextParallel::ContextParallel(collectives::Communicator& comm, collectives::Group group)
    : comm_(comm), group_(std::move(group)), rank_(group_.index_of(comm.rank())) {}

at::Tensor ContextParallel::shard(const at::Tensor& full, int64_t dim) const {
  const int n = size();
  if (n == 1) return full;
  const int64_t s = full.size(dim);
  MTP_INTERNAL_ASSERT(s % (2 * n) == 0,
                      fmt::format("context parallel: a sequence of {} cannot be cut into 2 x {} "
                                  "chunks",
                                  s, n));
  const std::vector<at::Tensor> chunks = full.chunk(2 * n, dim);
  return at::cat(
      {chunks[static_cast<size_t>(rank_)], chunks[static_cast<size_t>(2 * n - 1 - rank_)]}, dim);
}

at::Tensor ContextParallel::positions(int64_t seq_length) const {
  return shard(at::arange(seq_length, at::kLong), 0);
}

at::Tensor ContextParallel::gather_sequence(const at::Tensor& local, int64_t dim) {
  const int n = size();
  if (n == 1) return local;
  // all_gather concatenates flat shards; move `dim` first so each member's shard is one block.
  const at::Tensor front = local.movedim(dim, 0).contiguous();
  const at::Tensor all = comm_.all_gather(group_, front.view({-1}), front.numel() * n);
  std::vector<int64_t> member_shape = front.sizes().vec();
  std::vector<at::Tensor> parts = all.view({-1}).chunk(n, 0);
  for (auto& p : parts) p = p.view(member_shape);
  return to_global_order(parts, 0).movedim(0, dim).contiguous();
}

at::Tensor ContextParallel::reduce_scatter_sequence(const at::Tensor& global) {
  if (size() == 1) return global;
  const at::Tensor member_major = to_member_order(global, size()).contiguous();
  std::vector<int64_t> shape = global.sizes().vec();
  shape[0] /= size();
  return comm_.reduce_scatter_sum(group_, member_major.view({-1})).view(shape);
}

at::Tensor ContextParallel::all_gather_sequence(const at::Tensor& local) {
  if (size() == 1) return local;
  const auto self = reinterpret_cast<int64_t>(this);  // NOLINT
  const at::Device device = local.device();
  // CUDA: the node works on CPU copies (see AllGatherSequence); copies change no bits.
  const at::Tensor input = device.is_cpu() ? local : local.cpu();
  const at::Tensor out =
      AllGatherSequence::apply(input, self, static_cast<int64_t>(device.type()),
                               static_cast<int64_t>(device.has_index() ? device.index() : 0));
  return device.is_cpu() ? out : out.to(device);
}

at::Tensor ContextParallel::roll_left(const at::Tensor& t) {
  const int n = size();
  const int64_t s_local = t.size(-1), c = s_local / 2;
  if (n == 1) return model::roll_left(t);
  at::Tensor out = at::zeros_like(t);
  // Every member's first token of each chunk: [b, 2] → [n, b, 2] in member order.
  const at::Tensor firsts = at::stack({t.select(-1, 0), t.select(-1, c)}, -1).contiguous();
  const at::Tensor all =
      comm_.all_gather(group_, firsts.view({-1}), firsts.numel() * n).view({n, -1, 2});
  // Chunk `rank` (first half): its last slot is chunk rank+1's first token, held by member
  // rank+1 as its first half, or (rank = n−1) chunk n, this member's own second half.
  out.narrow(-1, 0, c - 1).copy_(t.narrow(-1, 1, c - 1));
  out.select(-1, c - 1).copy_(rank_ + 1 < n ? all[rank_ + 1].select(-1, 0)
                                            : all[rank_].select(-1, 1));
  // Chunk 2n−1−rank (second half): its last slot is chunk 2n−rank's first token, the second
  // half of member rank−1; for rank 0 it is the sequence's end, 0.
  out.narrow(-1, c, c - 1).copy_(t.narrow(-1, c + 1, c - 1));
  if (rank_ > 0) out.select(-1, s_local - 1).copy_(all[rank_ - 1].select(-1, 1));
  return out;
}

}  // namespace mtp::model
