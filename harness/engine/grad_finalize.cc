#include "harness/engine/grad_finalize.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <algorithm>

#include "harness/common/error.h"
#include "harness/model/params.h"

namespace mtp::engine {

void finalize_model_grads(LocalModel& model, const ParamPlacement& placement,
                          const Topology& topology, int rank, collectives::Communicator& comm,
                          config::Fault inject, int mtp_stage,
                          std::optional<double> per_token_count) {
  c10::NoGradGuard no_grad;
  model.load_main_grads();
  const RankCoord me = topology.coord(rank);
  // (1) Data-parallel sync, chunk by chunk and bucket by bucket (DistributedDataParallel.
  // finish_grad_sync → start_grad_sync): scale by 1/DP, then all-reduce, or with the distributed
  // optimizer reduce-scatter into this rank's shard (the rest of the buffer keeps local grads).
  // With context parallel the group is every (dp, cp) of the pipeline rank and the scale
  // 1/(DP·CP) (distributed_data_parallel.py: intra_dp_cp_group).
  // Expert parallelism: an expert buffer holds this EP rank's routed experts, whose grads
  // already sum the tokens of every EP member; it is scaled alike (expert_gradient_scaling_factor
  // = 1/(DP·CP)) and summed over the expert-data-parallel group only (DDP's
  // expert_parallel_buffers over expt_dp_group).
  const int DP = topology.grad_group_size();
  if (DP > 1) {
    const collectives::Group dp = topology.grad_group(me.pipeline_rank);
    const collectives::Group expert_dp = topology.expert_data_parallel_group(me);
    for (auto& buf : model.buffers) {
      // Per-token loss: no average (distributed_data_parallel.py: gradient_scaling_factor 1).
      if (!per_token_count) buf.grad_data.mul_(1.0 / DP);
      if (buf.expert) {
        MTP_INTERNAL_ASSERT(!buf.layout.options.distributed_optimizer,
                            "expert buffers with the distributed optimizer");
        if (expert_dp.size() > 1) comm.all_reduce_sum(expert_dp, buf.grad_data);
        continue;
      }
      for (size_t b = 0; b < buf.layout.buckets.size(); ++b) {
        const BufferBucket& bucket = buf.layout.buckets[b];
        at::Tensor data = buf.grad_data.slice(0, bucket.start, bucket.end);
        if (!buf.layout.options.distributed_optimizer) {
          comm.all_reduce_sum(dp, data);
          continue;
        }
        const auto [s, e] = buf.shards[b];
        const auto [rs, re] =
            collectives::shard_range(bucket.end - bucket.start, DP, topology.grad_group_rank(me));
        MTP_INTERNAL_ASSERT(rs == s - bucket.start && re == e - bucket.start,
                            "bucket shards and collective shards disagree");
        buf.grad_data.slice(0, s, e).copy_(comm.reduce_scatter_sum(dp, data));
      }
    }
  }
  // (4) Word-embedding all-reduce over the embedding group, copies in ascending stage order, on
  // the elements this rank's optimizer updates (with the distributed optimizer the embedding has
  // a bucket of its own, so that range is the same on every copy).
  if (placement.embedding_group.size() > 1) {
    const size_t index = placement.index_of(config::kWordEmbeddingName);
    LocalParam* copy = nullptr;
    for (int stage : placement.embedding_group) {
      if (LocalParam* p = model.find(index, stage)) {
        MTP_INTERNAL_ASSERT(copy == nullptr,
                            fmt::format("rank {} holds two embedding copies", rank));
        copy = p;
      }
    }
    std::vector<int> group = placement.embedding_group;
    if (inject == config::Fault::kMtpEmbeddingOutOfGroup && mtp_stage > 0) {
      // Planted bug: the MTP stage's copy is not a member (it keeps its own grad).
      group.erase(std::remove(group.begin(), group.end(), mtp_stage), group.end());
      if (copy != nullptr && copy->stage == mtp_stage) copy = nullptr;
    }
    if (copy != nullptr && group.size() > 1) {
      const auto [b, e] = model.owned_range(*copy);
      at::Tensor owned = copy->main_grad.view({-1}).slice(0, b, e);
      comm.all_reduce_sum(topology.stage_group("embedding group", group, me.data_parallel_rank,
                                               me.context_parallel_rank),
                          owned);
    }
  }
  // Per-token loss: every main grad times 1.0 / clamp(num_tokens, min=1), a float32 division
  // as Megatron's tensor arithmetic does it (the double holds that float exactly).
  if (per_token_count) {
    const float n0 = static_cast<float>(std::max(*per_token_count, 1.0));
    const double scaling = static_cast<double>(1.0f / n0);
    for (auto& buf : model.buffers) buf.grad_data.mul_(scaling);
  }
}

void gather_main_grads_to_first_rank(LocalModel& model, const Topology& topology, int rank,
                                     collectives::Communicator& comm) {
  const RankCoord me = topology.coord(rank);
  if (topology.grad_group_size() == 1) return;
  const collectives::Group dp = topology.grad_group(me.pipeline_rank);
  const int root = dp.ranks.front();
  for (auto& buf : model.buffers) {
    if (!buf.layout.options.distributed_optimizer || buf.expert) continue;
    for (size_t b = 0; b < buf.shards.size(); ++b) {
      const auto [s, e] = buf.shards[b];
      auto parts = comm.gather(dp, root, buf.grad_data.slice(0, s, e));
      const BufferBucket& bucket = buf.layout.buckets[b];
      for (size_t d = 0; d < parts.size(); ++d) {
        const auto [rs, re] =
            collectives::shard_range(bucket.end - bucket.start, dp.size(), static_cast<int>(d));
        buf.grad_data.slice(0, bucket.start + rs, bucket.start + re).copy_(parts[d]);
      }
    }
  }
}

}  // namespace mtp::engine
