#include "harness/engine/local_model.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <algorithm>

#include "harness/common/error.h"
#include "harness/config/param_specs.h"
#include "harness/engine/chunk_support.h"
#include "kernels/ops.h"

namespace mtp::engine {

LocalModel::LocalModel(const RunPlan& plan, const Implementation& impl, const InitialWeights& init,
                       const ParamPlacement& placement, const Topology& topology, int rank,
                       at::ScalarType dtype, at::ScalarType main_dtype, bool masters_from_init,
                       at::Device device, const model::ParallelGroups& groups)
    : per_backward_(main_dtype != dtype) {
  const layout::PipelineLayout& layout = plan.layout;
  const RankCoord me = topology.coord(rank);
  chunks_by_stage.assign(layout.num_stages(), nullptr);
  for (int v = 0; v < layout.virtual_size; ++v) {
    const int stage = v * layout.pipeline_size + me.pipeline_rank;
    chunks.push_back(impl.build_chunk(layout, stage, plan.model, init, dtype, device, groups));
    chunks_by_stage[stage] = chunks.back().get();
    MTP_INTERNAL_ASSERT(chunks.back()->plan().stage_index == stage,
                        fmt::format("chunk built for stage {} reports stage {}", stage,
                                    chunks.back()->plan().stage_index));
    std::vector<std::string> names;
    for (const auto& [name, t] : chunks.back()->params().entries()) names.push_back(name);
    MTP_INTERNAL_ASSERT(
        names == held_param_names(impl.stage_param_names(layout, stage, plan.model), groups),
        fmt::format("stage {}: the chunk's parameters differ from "
                    "stage_param_names",
                    stage));
    // language_module.py setup_embeddings_and_output_layer: with P > 1 every copy of a shared
    // word embedding (tied head or MTP) is marked shared_embedding.
    const bool shared =
        layout.pipeline_size > 1 && (!plan.model.untie_embeddings || plan.model.mtp_num_layers > 0);
    // Expert parallelism: the routed experts go to a buffer of their own (Megatron DDP's
    // expert_parallel_buffers, params with allreduce = False); EP 1 keeps them dense.
    const bool split_experts = groups.ep != nullptr && groups.ep->size() > 1;
    std::vector<BufferParamSpec> specs, expert_specs;
    for (const auto& name : megatron_registration_order(names)) {
      const bool expert = split_experts && config::routed_expert_index(name) >= 0;
      (expert ? expert_specs : specs)
          .push_back({name, chunks.back()->params().get(name).numel(),
                      shared && name == config::kWordEmbeddingName});
    }
    BufferOptions opt;
    opt.data_parallel_size = topology.grad_group_size();  // Megatron: the dp-cp group
    opt.distributed_optimizer = plan.variant.optimizer == config::Optimizer::kDistributedAdam;
    // DDP: bucketing only on pipeline rank 0, and not for model chunks after the first.
    opt.bucket_size = (me.pipeline_rank == 0 && v == 0) ? plan.variant.ddp_bucket_size : 0;
    auto add_buffer = [&](const std::vector<BufferParamSpec>& of, bool expert) {
      ChunkBuffer buf;
      buf.stage = stage;
      buf.expert = expert;
      buf.layout = megatron_buffer_layout(of, opt);
      buf.grad_data =
          at::zeros({buf.layout.numel}, at::TensorOptions().dtype(main_dtype).device(device));
      for (int b = 0; b < static_cast<int>(buf.layout.buckets.size()); ++b) {
        buf.shards.push_back(buf.layout.shard(b, topology.grad_group_rank(me)));
      }
      buffers.push_back(std::move(buf));
    };
    add_buffer(specs, false);
    if (!expert_specs.empty()) add_buffer(expert_specs, true);
  }
  // Canonical order: placement index, then stage.
  for (size_t i = 0; i < placement.params.size(); ++i) {
    const PlacedParam& pp = placement.params[i];
    for (int stage : pp.stages) {
      if (chunks_by_stage[stage] == nullptr || !chunks_by_stage[stage]->params().has(pp.name)) {
        continue;  // not this pipeline rank's stage, or another EP rank's expert
      }
      size_t b = 0;
      while (buffers[b].stage != stage || !buffers[b].layout.contains(pp.name)) ++b;
      LocalParam lp;
      lp.name = pp.name;
      lp.index = i;
      lp.stage = stage;
      lp.buffer = b;
      lp.owner = stage == pp.stages.front();
      lp.weight = chunks_by_stage[stage]->params().get(pp.name);
      const BufferParamRange& r = buffers[b].layout.range(pp.name);
      lp.main_grad = buffers[b].grad_data.slice(0, r.start, r.end).view(lp.weight.sizes());
      if (main_dtype != dtype) {
        lp.master = masters_from_init
                        ? init.get(pp.name).to(lp.weight.options().dtype(main_dtype)).clone()
                        : lp.weight.detach().to(main_dtype).clone();
      }
      params.push_back(std::move(lp));
    }
  }
}

void LocalModel::start_step() {
  for (auto& p : params) p.weight.mutable_grad().reset();
  if (per_backward_) {
    for (auto& b : buffers) b.grad_data.zero_();
  }
}

void LocalModel::zero_stage_grads(int stage) {
  c10::NoGradGuard no_grad;
  for (auto& p : params) {
    if (p.stage != stage) continue;
    p.weight.mutable_grad().reset();
    p.main_grad.zero_();
  }
}

void LocalModel::accumulate_main_grads(int stage) {
  if (!per_backward_) return;
  c10::NoGradGuard no_grad;
  for (auto& p : params) {
    if (p.stage != stage || !p.weight.grad().defined()) continue;
    kernels::accumulate_main_grad(p.main_grad, p.weight.grad());  // add_'s bits
    p.weight.mutable_grad().reset();
  }
}

void LocalModel::load_main_grads() {
  if (per_backward_) return;
  c10::NoGradGuard no_grad;
  for (auto& p : params) {
    const at::Tensor& g = p.weight.grad();
    if (g.defined()) {
      p.main_grad.copy_(g);
    } else {
      p.main_grad.zero_();
    }
  }
}

std::pair<int64_t, int64_t> LocalModel::owned_range(const LocalParam& p) const {
  const ChunkBuffer& buf = buffers[p.buffer];
  const BufferParamRange& r = buf.layout.range(p.name);
  const auto [s, e] = buf.shards[r.bucket];
  const int64_t b = std::max(s, r.start), end = std::min(e, r.end);
  if (b >= end) return {0, 0};
  return {b - r.start, end - r.start};
}

LocalParam* LocalModel::find(size_t index, int stage) {
  for (auto& p : params) {
    if (p.index == index && p.stage == stage) return &p;
  }
  return nullptr;
}

}  // namespace mtp::engine
