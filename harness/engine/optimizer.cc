#include "harness/engine/optimizer.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <cmath>

#include "harness/common/error.h"

namespace mtp::engine {

AdamHyper AdamHyper::from(const config::TrainingConfig& t) {
  return {t.lr, t.adam_beta1, t.adam_beta2, t.adam_eps, t.weight_decay};
}

void adam_update(at::Tensor& w, const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                 int64_t step, const AdamHyper& h) {
  const double bc1 = h.bias_correction ? 1.0 - std::pow(h.beta1, static_cast<double>(step)) : 1.0;
  const double bc2 = h.bias_correction ? 1.0 - std::pow(h.beta2, static_cast<double>(step)) : 1.0;
  exp_avg.mul_(h.beta1).add_(g, 1.0 - h.beta1);
  exp_avg_sq.mul_(h.beta2).addcmul_(g, g, 1.0 - h.beta2);
  auto update = (exp_avg / bc1) / ((exp_avg_sq / bc2).sqrt() + h.eps);
  if (h.weight_decay != 0.0) update = update + h.weight_decay * w;
  w.sub_(h.lr * update);
}

UpdatePredicate update_predicate(config::EmbeddingCopyUpdate mode) {
  if (mode == config::EmbeddingCopyUpdate::kReplicated) {
    return [](const LocalParam&) { return true; };
  }
  return [](const LocalParam& p) { return p.owner || p.name != config::kWordEmbeddingName; };
}

at::Tensor Optimizer::master(const LocalParam& p) const {
  return p.master.defined() ? p.master : p.weight;
}

namespace {

/// Adam over every parameter tensor a rank holds, one state per tensor.
class Adam final : public Optimizer {
 public:
  Adam(LocalModel& model, AdamHyper hyper, UpdatePredicate updates)
      : model_(model), hyper_(hyper), updates_(std::move(updates)) {
    for (const auto& p : model_.params) {
      exp_avg_.push_back(at::zeros_like(master(p)));
      exp_avg_sq_.push_back(at::zeros_like(master(p)));
    }
  }

  void step(int64_t step) override {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < model_.params.size(); ++i) {
      LocalParam& p = model_.params[i];
      if (!updates_(p)) continue;
      at::Tensor w = master(p);
      adam_update(w, p.main_grad, exp_avg_[i], exp_avg_sq_[i], step, hyper_);
      if (p.master.defined()) p.weight.copy_(p.master);
    }
  }

  std::vector<AdamState> state() override {
    std::vector<AdamState> out;
    for (size_t i = 0; i < model_.params.size(); ++i) {
      out.push_back({exp_avg_[i].clone(), exp_avg_sq_[i].clone()});
    }
    return out;
  }

  void load_state(const std::vector<AdamState>& state) override {
    MTP_INTERNAL_ASSERT(state.size() == model_.params.size(), "one state per parameter copy");
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < model_.params.size(); ++i) {
      if (!updates_(model_.params[i])) continue;
      exp_avg_[i].copy_(state[i].exp_avg.view(exp_avg_[i].sizes()));
      exp_avg_sq_[i].copy_(state[i].exp_avg_sq.view(exp_avg_sq_[i].sizes()));
    }
  }

 private:
  LocalModel& model_;
  AdamHyper hyper_;
  UpdatePredicate updates_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;  // per LocalModel::params entry
};

/// Megatron's DistributedOptimizer: Adam on this data-parallel rank's shard of every bucket of
/// the master weights (fp32 for bf16 parameters, else the parameters' own type; state only for
/// the shard), the shard re-cast into the parameter buffer, then each bucket's parameters
/// all-gathered over the data-parallel group (param_and_grad_buffer.py start_param_sync). Masters
/// and parameters live in flat buffers laid out like the grad buffer (Megatron keeps the
/// parameters there as views; copies are exact).
class DistributedAdam final : public Optimizer {
 public:
  DistributedAdam(LocalModel& model, AdamHyper hyper, UpdatePredicate updates,
                  collectives::Group dp, collectives::Communicator& comm)
      : model_(model), hyper_(hyper), dp_(std::move(dp)), comm_(comm) {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < model_.buffers.size(); ++i) {
      ChunkBuffer& buf = model_.buffers[i];
      MTP_INTERNAL_ASSERT(buf.layout.options.distributed_optimizer,
                          "distributed Adam needs buffers laid out for it");
      Chunk c;
      c.main_param = at::zeros_like(buf.grad_data);  // main-grad dtype: fp32 for bf16
      for (const auto& p : model_.params) {
        if (p.buffer != i) continue;
        const BufferParamRange& r = buf.layout.range(p.name);
        c.main_param.slice(0, r.start, r.end).copy_(Optimizer::master(p).reshape({-1}));
        c.dtype = p.weight.scalar_type();
      }
      c.param_data = at::zeros(buf.grad_data.sizes(), buf.grad_data.options().dtype(c.dtype));
      for (size_t b = 0; b < buf.shards.size(); ++b) {
        const auto [s, e] = buf.shards[b];
        c.exp_avg.push_back(at::zeros({e - s}, buf.grad_data.options()));
        c.exp_avg_sq.push_back(at::zeros({e - s}, buf.grad_data.options()));
        // A bucket is updated when its parameters are; the word-embedding copies have buckets of
        // their own (shared_embedding), so a bucket is all in or all out.
        int in = 0, out = 0;
        for (const auto& name : buf.layout.buckets[b].params) {
          for (const auto& p : model_.params) {
            if (p.name == name && p.stage == buf.stage) (updates(p) ? in : out)++;
          }
        }
        MTP_INTERNAL_ASSERT(in == 0 || out == 0, fmt::format("stage {} bucket {} mixes updated "
                                                             "and broadcast copies",
                                                             buf.stage, b));
        c.update.push_back(in > 0);
      }
      chunks_.push_back(std::move(c));
    }
  }

  void step(int64_t step) override {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < model_.buffers.size(); ++i) {
      ChunkBuffer& buf = model_.buffers[i];
      Chunk& c = chunks_[i];
      for (size_t b = 0; b < buf.shards.size(); ++b) {
        if (!c.update[b]) continue;
        const auto [s, e] = buf.shards[b];
        at::Tensor w = c.main_param.slice(0, s, e);
        const at::Tensor g = buf.grad_data.slice(0, s, e);
        adam_update(w, g, c.exp_avg[b], c.exp_avg_sq[b], step, hyper_);
        at::Tensor shard = c.param_data.slice(0, s, e);
        shard.copy_(w);  // round to the parameters' type
        const BufferBucket& bucket = buf.layout.buckets[b];
        c.param_data.slice(0, bucket.start, bucket.end)
            .copy_(comm_.all_gather(dp_, shard, bucket.end - bucket.start));
      }
      for (auto& p : model_.params) {
        if (p.buffer != i) continue;
        const BufferParamRange& r = buf.layout.range(p.name);
        if (!c.update[r.bucket]) continue;
        p.weight.copy_(c.param_data.slice(0, r.start, r.end).view(p.weight.sizes()));
      }
    }
  }

  void gather_masters_to_first_rank() override {
    if (dp_.size() == 1) return;
    const int root = dp_.ranks.front();
    for (size_t i = 0; i < model_.buffers.size(); ++i) {
      const ChunkBuffer& buf = model_.buffers[i];
      for (size_t b = 0; b < buf.shards.size(); ++b) {
        const auto [s, e] = buf.shards[b];
        auto parts = comm_.gather(dp_, root, chunks_[i].main_param.slice(0, s, e));
        const BufferBucket& bucket = buf.layout.buckets[b];
        for (size_t d = 0; d < parts.size(); ++d) {
          const auto [rs, re] =
              collectives::shard_range(bucket.end - bucket.start, dp_.size(), static_cast<int>(d));
          chunks_[i].main_param.slice(0, bucket.start + rs, bucket.start + re).copy_(parts[d]);
        }
      }
    }
  }

  std::vector<AdamState> state() override {
    std::vector<AdamState> out(model_.params.size());
    for (size_t i = 0; i < model_.buffers.size(); ++i) {
      const ChunkBuffer& buf = model_.buffers[i];
      // The whole buffer's moments: each bucket's shards, all-gathered in data-parallel order.
      at::Tensor m = at::zeros_like(buf.grad_data), v = at::zeros_like(buf.grad_data);
      for (size_t b = 0; b < buf.shards.size(); ++b) {
        const BufferBucket& bucket = buf.layout.buckets[b];
        const int64_t n = bucket.end - bucket.start;
        m.slice(0, bucket.start, bucket.end).copy_(comm_.all_gather(dp_, chunks_[i].exp_avg[b], n));
        v.slice(0, bucket.start, bucket.end)
            .copy_(comm_.all_gather(dp_, chunks_[i].exp_avg_sq[b], n));
      }
      for (size_t k = 0; k < model_.params.size(); ++k) {
        const LocalParam& p = model_.params[k];
        if (p.buffer != i) continue;
        const BufferParamRange& r = buf.layout.range(p.name);
        out[k] = {m.slice(0, r.start, r.end).view(p.weight.sizes()).clone(),
                  v.slice(0, r.start, r.end).view(p.weight.sizes()).clone()};
      }
    }
    return out;
  }

  void load_state(const std::vector<AdamState>& state) override {
    MTP_INTERNAL_ASSERT(state.size() == model_.params.size(), "one state per parameter copy");
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < model_.buffers.size(); ++i) {
      const ChunkBuffer& buf = model_.buffers[i];
      at::Tensor m = at::zeros_like(buf.grad_data), v = at::zeros_like(buf.grad_data);
      for (size_t k = 0; k < model_.params.size(); ++k) {
        const LocalParam& p = model_.params[k];
        if (p.buffer != i) continue;
        const BufferParamRange& r = buf.layout.range(p.name);
        m.slice(0, r.start, r.end).copy_(state[k].exp_avg.reshape({-1}));
        v.slice(0, r.start, r.end).copy_(state[k].exp_avg_sq.reshape({-1}));
      }
      for (size_t b = 0; b < buf.shards.size(); ++b) {
        if (!chunks_[i].update[b]) continue;
        const auto [s, e] = buf.shards[b];
        chunks_[i].exp_avg[b].copy_(m.slice(0, s, e));
        chunks_[i].exp_avg_sq[b].copy_(v.slice(0, s, e));
      }
    }
  }

  at::Tensor master(const LocalParam& p) const override {
    const BufferParamRange& r = model_.buffers[p.buffer].layout.range(p.name);
    return chunks_[p.buffer].main_param.slice(0, r.start, r.end).view(p.weight.sizes());
  }

 private:
  struct Chunk {
    at::Tensor main_param;  // masters (main-grad dtype), flat like the grad buffer
    at::Tensor param_data;  // the parameters' type, for the all-gather
    at::ScalarType dtype = at::kFloat;
    std::vector<at::Tensor> exp_avg, exp_avg_sq;  // per bucket, shard-sized
    std::vector<bool> update;                     // per bucket
  };
  LocalModel& model_;
  AdamHyper hyper_;
  collectives::Group dp_;
  collectives::Communicator& comm_;
  std::vector<Chunk> chunks_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const RunPlan& plan, LocalModel& model,
                                          const Topology& topology, int rank,
                                          collectives::Communicator& comm) {
  AdamHyper hyper = AdamHyper::from(plan.training);
  hyper.bias_correction = plan.model.inject != config::Fault::kAdamBiasCorrectionOff;
  UpdatePredicate updates = update_predicate(plan.variant.embedding_copy_update);
  if (plan.variant.optimizer == config::Optimizer::kAdam) {
    return std::make_unique<Adam>(model, hyper, std::move(updates));
  }
  return std::make_unique<DistributedAdam>(model, hyper, std::move(updates),
                                           topology.grad_group(topology.coord(rank).pipeline_rank),
                                           comm);
}

void broadcast_embedding_copies(LocalModel& model, const ParamPlacement& placement,
                                const Topology& topology, int rank,
                                collectives::Communicator& comm) {
  if (placement.embedding_group.size() < 2) return;
  const size_t index = placement.index_of(config::kWordEmbeddingName);
  const RankCoord me = topology.coord(rank);
  const collectives::Group group =
      topology.stage_group("embedding group", placement.embedding_group, me.data_parallel_rank,
                           me.context_parallel_rank);
  const int root = topology.rank(placement.embedding_group.front() % topology.pipeline_size(),
                                 me.data_parallel_rank, me.context_parallel_rank);
  for (int stage : placement.embedding_group) {
    if (LocalParam* p = model.find(index, stage)) {
      c10::NoGradGuard no_grad;
      comm.broadcast(group, root, p->weight);
      return;
    }
  }
}

}  // namespace mtp::engine
