#include "harness/engine/grad_finalize.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include "harness/common/error.h"
#include "harness/model/params.h"

namespace mtp::engine {

void finalize_model_grads(LocalModel& model, const ParamPlacement& placement,
                          const Topology& topology, int rank, collectives::Communicator& comm) {
  c10::NoGradGuard no_grad;
  model.load_main_grads();
  const RankCoord me = topology.coord(rank);
  // (1) Data-parallel sync, chunk by chunk (DistributedDataParallel.finish_grad_sync).
  const int DP = topology.data_parallel_size();
  if (DP > 1) {
    const collectives::Group dp = topology.data_parallel_group(me.pipeline_rank);
    for (auto& buf : model.buffers) {
      buf.grad_data.mul_(1.0 / DP);
      comm.all_reduce_sum(dp, buf.grad_data);
    }
  }
  // (4) Word-embedding all-reduce over the embedding group, copies in ascending stage order.
  if (placement.embedding_group.size() > 1) {
    const size_t index = placement.index_of(config::kWordEmbeddingName);
    LocalParam* copy = nullptr;
    for (int stage : placement.embedding_group) {
      if (LocalParam* p = model.find(index, stage)) {
        MTP_INTERNAL_ASSERT(copy == nullptr, fmt::format("rank {} holds two embedding copies", rank));
        copy = p;
      }
    }
    if (copy != nullptr) {
      comm.all_reduce_sum(
          topology.stage_group("embedding group", placement.embedding_group, me.data_parallel_rank),
          copy->main_grad);
    }
  }
}

}  // namespace mtp::engine
