#include "harness/engine/trainer.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "harness/collectives/collectives.h"
#include "harness/common/error.h"
#include "harness/config/param_specs.h"
#include "harness/data/microbatch.h"
#include "harness/engine/canonical_grads.h"
#include "harness/engine/checkpoint.h"
#include "harness/engine/determinism.h"
#include "harness/engine/dtypes.h"
#include "harness/engine/executor.h"
#include "harness/engine/grad_clip.h"
#include "harness/engine/grad_finalize.h"
#include "harness/engine/local_model.h"
#include "harness/engine/optimizer.h"
#include "harness/engine/placement.h"
#include "harness/engine/replica_check.h"
#include "harness/engine/step_recorder.h"
#include "harness/engine/topology.h"
#include "harness/gpu/gpu.h"
#include "harness/model/expert_parallel.h"
#include "harness/transport/transport.h"

namespace mtp::engine {
namespace {

at::Device make_device(config::Device d, int index) {
  if (d == config::Device::kCpu) return at::Device(at::kCPU);
  if (!at::hasCUDA()) {
    throw InputError("device \"cuda\": this build of LibTorch has no CUDA, or no GPU is visible");
  }
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

/// What every rank of one run reads (built once, read-only afterwards).
struct RunContext {
  const RunPlan& plan;
  const Implementation& impl;
  const RunOptions& options;
  Topology topology;
  ParamPlacement placement;
  StartState start;
  std::unique_ptr<data::TokenSource> source;  ///< null when options.batches serves them
  std::shared_ptr<const data::MicrobatchSource> batches;
  std::vector<std::string> chunk_map;
  at::ScalarType dtype;       ///< parameters and activations
  at::ScalarType main_dtype;  ///< main grads, master weights, loss mask and losses
  at::Device device;
  bool single_process;
  std::chrono::steady_clock::time_point t0;
};

/// One microbatch's tokens, labels and loss mask as CPU tensors [b, s] (int32, int32, uint8):
/// microbatch `mb` of data-parallel rank `dp` in `step`, i.e. global microbatch mb·DP + dp of the
/// step's DP·M (Megatron's MegatronPretrainingSampler gives data-parallel rank d the d-th
/// micro-batch-sized slice of every DP·b consecutive samples, megatron/training/datasets/
/// data_samplers.py).
struct HostMicrobatch {
  at::Tensor tokens, labels, loss_mask;
};

HostMicrobatch host_microbatch(const RunContext& ctx, int64_t step, int64_t mb, int dp) {
  const int64_t DP = ctx.topology.data_parallel_size();
  const int64_t M = ctx.plan.num_microbatches;
  const int64_t b = ctx.plan.model.micro_batch_size, s = ctx.plan.model.seq_length;
  const data::Microbatch m = ctx.batches->build(step, mb * DP + dp, M * DP);
  HostMicrobatch h{at::empty({b, s}, at::kInt), at::empty({b, s}, at::kInt),
                   at::empty({b, s}, at::kByte)};
  std::memcpy(h.tokens.data_ptr(), m.tokens.data(), m.tokens.size() * sizeof(int32_t));
  std::memcpy(h.labels.data_ptr(), m.labels.data(), m.labels.size() * sizeof(int32_t));
  std::memcpy(h.loss_mask.data_ptr(), m.loss_mask.data(), m.loss_mask.size());
  return h;
}

/// [N_0 .. N_D] of one microbatch's mask [b, s] (0/1): the valid tokens of the main mask and of
/// each depth k's mask rolled left k times (zero fill: the positions >= k of each row).
std::vector<double> depth_token_counts(const at::Tensor& loss_mask, int64_t D) {
  const at::Tensor mask = loss_mask.to(at::kLong);
  const int64_t s = mask.size(1);
  std::vector<double> n(static_cast<size_t>(1 + D), 0.0);
  for (int64_t k = 0; k <= D && k < s; ++k) {
    n[static_cast<size_t>(k)] = static_cast<double>(mask.slice(1, k, s).sum().item<int64_t>());
  }
  return n;
}

/// The step loop of one rank (SPMD: every rank runs it, the recording rank also writes).
class RankWorker {
 public:
  RankWorker(const RunContext& ctx, transport::Transport& tr, int rank)
      : ctx_(ctx),
        plan_(ctx.plan),
        topo_(ctx.topology),
        placement_(ctx.placement),
        rank_(rank),
        me_(topo_.coord(rank)),
        comm_(tr, rank),
        ep_comm_(tr, rank),
        cp_(topo_.context_parallel_size() > 1
                ? std::make_unique<model::ContextParallel>(
                      comm_,
                      topo_.context_parallel_group(me_.pipeline_rank, me_.data_parallel_rank))
                : nullptr),
        ep_(topo_.expert_parallel_size() > 1
                ? std::make_unique<model::ExpertParallel>(
                      ep_comm_, topo_.expert_parallel_group(me_), plan_.model.num_moe_experts)
                : nullptr),
        model_(plan_, ctx.impl, ctx.start.weights, placement_, topo_, rank, ctx.dtype,
               ctx.main_dtype, ctx.start.resumed, ctx.device, {cp_.get(), ep_.get()}),
        optimizer_(make_optimizer(plan_, model_, topo_, rank, comm_)) {}

  void run(RunResult& result) {
    if (rank_ == 0 && ctx_.options.write_record) open_record();
    if (record_copies()) write_copies(ctx_.start.step);  // a resumed run's copies as loaded
    if (ctx_.start.optimizer) load_optimizer_state();
    if (plan_.training.save_optimizer_state && ctx_.start.step > 0 && ctx_.options.write_record) {
      save_optimizer_state(ctx_.start.step);
    }
    const int64_t steps = plan_.training.steps;
    for (int64_t step = ctx_.start.step + 1; step <= steps; ++step) {
      const auto mbs = microbatches(step);
      if (recorder_) record_batch(step);
      model_.start_step();
      ExecutionOptions exec;
      exec.overlap_p2p = plan_.variant.overlap_p2p;
      exec.overlap_expert_comm = ep_ != nullptr;
      exec.device = ctx_.device;
      const bool canonical = plan_.model.accumulation == config::Accumulation::kCanonical;
      if (canonical) {
        // Each (global microbatch, use) contribution kept apart (canonical_grads.h).
        const int64_t dp = plan_.data_parallel_size();
        exec.after_microbatch_backward = [this, dp](int stage, int mb,
                                                    const model::ChunkProgram& prog) {
          collect_microbatch_grads(model_, stage, int64_t{mb} * dp + me_.data_parallel_rank, prog);
        };
      } else if (model_.accumulates_per_backward()) {
        exec.after_backward = [this](int stage) { model_.accumulate_main_grads(stage); };
      }
      // Planted bugs (config/fault.h); a correct run sets neither.
      if (plan_.model.inject == config::Fault::kGradsZeroedBetweenMicrobatches) {
        exec.before_backward = [this](int stage) { model_.zero_stage_grads(stage); };
      }
      if (plan_.model.inject == config::Fault::kStandaloneStageFedZeros &&
          plan_.layout.mtp_standalone) {
        exec.zero_input_stage = plan_.layout.mtp_stage;
      }
      if (plan_.variant.cuda_graphs && plan_.layout.num_stages() == 1) {
        if (!graph_) graph_ = std::make_unique<MicrobatchGraph>(ctx_.device);
        exec.graph = graph_.get();
      } else if (plan_.variant.cuda_graphs) {
        if (!pipeline_graphs_) {
          pipeline_graphs_ =
              std::make_unique<PipelineGraphs>(ctx_.device, plan_.layout.num_stages());
        }
        exec.pipeline_graphs = pipeline_graphs_.get();
      }
      RankStep rs{me_.pipeline_rank, model_.chunks_by_stage,
                  topo_.pipeline_ranks(me_.data_parallel_rank, me_.context_parallel_rank)};
      const StepLosses losses =
          run_rank_step(rs, plan_.layout, plan_.schedule, mbs, comm_.transport(), exec);
      gather_losses(step, losses, result);
      if (canonical) {
        finalize_canonical_grads(model_, placement_, topo_, rank_, comm_);
      } else {
        finalize_model_grads(model_, placement_, topo_, rank_, comm_, plan_.model.inject,
                             plan_.layout.mtp_stage,
                             plan_.model.calculate_per_token_loss
                                 ? std::optional<double>(mbs.front().token_counts[0])
                                 : std::nullopt);
      }
      if (ctx_.options.after_grad_finalization) {
        c10::NoGradGuard no_grad;
        for (auto& p : model_.params) {
          ctx_.options.after_grad_finalization(step, rank_, p.name, p.stage, p.main_grad);
        }
      }
      // The recording rank needs every main grad for the record and for the canonical norm.
      const bool need_grads = ctx_.options.write_record || plan_.clip_grad > 0.0;
      if (need_grads) gather_main_grads_to_first_rank(model_, topo_, rank_, comm_);
      std::vector<at::Tensor> grads =
          need_grads ? gather_params(step, record::Group::kGrad,
                                     [](const LocalParam& p) { return p.main_grad; })
                     : std::vector<at::Tensor>{};
      clip_grads_by_global_norm(plan_.clip_grad, step, grads, model_, comm_, topo_.world(),
                                ctx_.device, recorder_.get(), plan_.model.inject);
      grads.clear();
      optimizer_->step(step);
      if (plan_.variant.embedding_copy_update == config::EmbeddingCopyUpdate::kBroadcast) {
        broadcast_embedding_copies(model_, placement_, topo_, rank_, comm_);
      }
      if (ctx_.options.after_optimizer_step) {
        c10::NoGradGuard no_grad;
        for (auto& p : model_.params) {
          ctx_.options.after_optimizer_step(step, rank_, p.name, p.stage, p.weight);
        }
      }
      if (record_copies()) {
        write_copies(step);  // the evidence; the replicas expectation judges it
        // The record holds CP rank 0's copies; the other CP ranks' are checked here.
        if (topo_.context_parallel_size() > 1) {
          check_replicas(step, model_, placement_, topo_, plan_.layout.pipeline_size,
                         plan_.model.num_moe_experts, comm_, ctx_.device);
        }
      } else {
        check_replicas(step, model_, placement_, topo_, plan_.layout.pipeline_size,
                       plan_.model.num_moe_experts, comm_, ctx_.device);
      }
      if (ctx_.options.write_record) {
        if (bf16()) optimizer_->gather_masters_to_first_rank();
        gather_params(step, record::Group::kWeight,
                      [this](const LocalParam& p) { return master_of(p); });
        if (bf16()) {
          gather_params(step, record::Group::kModelWeight,
                        [](const LocalParam& p) { return p.weight; });
        }
        if (plan_.training.save_optimizer_state) save_optimizer_state(step);
      }
      if (rank_ == 0 && ctx_.options.on_step) {
        ctx_.options.on_step(
            step, steps,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx_.t0).count());
      }
    }
    if (recorder_) recorder_->commit();
  }

 private:
  void open_record() {
    RecordContext rc;
    rc.scenario_name = ctx_.options.scenario_name;
    rc.implementation = ctx_.impl.name();
    rc.execution = ctx_.single_process
                       ? fmt::format("{} rank thread(s) in one process", topo_.world_size())
                       : fmt::format("{} processes, one per rank", topo_.world_size());
    rc.device_index = ctx_.options.device_index;
    rc.chunk_map = ctx_.chunk_map;
    rc.start_attrs = ctx_.start.attrs();
    rc.loss_dtype = ctx_.options.loss_dtype;
    rc.scenario_text = ctx_.options.scenario_text;
    for (const auto& p : placement_.params) rc.param_stages.emplace_back(p.name, p.stages);
    for (const auto& st : plan_.layout.stages) {
      rc.stage_coords.emplace_back(st.pipeline_rank, st.virtual_stage);
    }
    recorder_ = std::make_unique<StepRecorder>(ctx_.options.record_path, plan_, *ctx_.batches, rc);
    // The start step's weights: the parameters as built (the initial values cast to the
    // parameters' type), and for bf16 the fp32 masters (made from them, or the resumed masters).
    for (const auto& p : placement_.params) {
      const at::Tensor init = ctx_.start.weights.get(p.name);
      const at::Tensor w = init.to(ctx_.dtype);
      const at::Tensor master =
          ctx_.start.resumed ? init.to(ctx_.main_dtype) : w.to(ctx_.main_dtype);
      recorder_->write_tensor(ctx_.start.step, record::Group::kWeight, p.name, master);
      if (bf16()) recorder_->write_tensor(ctx_.start.step, record::Group::kModelWeight, p.name, w);
    }
  }

  bool bf16() const { return ctx_.dtype != ctx_.main_dtype; }

  // The weight the optimizer updates: the fp32 master of a bf16 run, else the weight itself.
  at::Tensor master_of(const LocalParam& p) const {
    return bf16() ? optimizer_->master(p) : p.weight;
  }

  // A resumed run: every local copy the optimizer updates gets the recorded copy's state.
  void load_optimizer_state() {
    const OptimizerCheckpoint& ck = *ctx_.start.optimizer;
    std::vector<AdamState> state;
    for (const auto& p : model_.params) {
      const size_t i = ck.index_of(p.name);
      state.push_back({ck.exp_avg[i].to(ctx_.device), ck.exp_avg_sq[i].to(ctx_.device)});
    }
    optimizer_->load_state(state);
  }

  // /steps/<step>/optimizer: the step count, then every parameter's exp_avg and exp_avg_sq
  // (the recorded copy's, gathered like the weights; engine/checkpoint.h).
  void save_optimizer_state(int64_t step) {
    const std::vector<AdamState> state = optimizer_->state();
    auto local = [this, &state](const LocalParam& p) -> const AdamState& {
      return state[static_cast<size_t>(&p - model_.params.data())];
    };
    if (recorder_) {
      recorder_->write_tensor(step, record::Group::kOptimizer, kOptimizerStepName,
                              at::scalar_tensor(static_cast<double>(step), at::kDouble));
    }
    gather_params(
        step, record::Group::kOptimizer, [&](const LocalParam& p) { return local(p).exp_avg; },
        exp_avg_name);
    gather_params(
        step, record::Group::kOptimizer, [&](const LocalParam& p) { return local(p).exp_avg_sq; },
        exp_avg_sq_name);
  }

  std::vector<MicrobatchTensors> microbatches(int64_t step) const {
    std::vector<MicrobatchTensors> mbs;
    const int64_t M = plan_.num_microbatches;
    std::vector<double> counts, ratio_counts;
    if (plan_.model.calculate_per_token_loss) {
      counts = step_token_counts(step, -1);
      if (plan_.model.inject == config::Fault::kMtpLocalTokenCount) {
        ratio_counts = step_token_counts(step, me_.data_parallel_rank);  // planted #7452
      }
    }
    for (int64_t mb = 0; mb < M; ++mb) {
      const HostMicrobatch h = host_microbatch(ctx_, step, mb, me_.data_parallel_rank);
      if (cp_) {
        // This CP rank's s/CP positions of every row, and the whole sequence's counts.
        mbs.push_back({cp_->shard(h.tokens, 1).to(at::kLong).to(ctx_.device),
                       cp_->shard(h.labels, 1).to(at::kLong).to(ctx_.device),
                       cp_->shard(h.loss_mask, 1).to(ctx_.main_dtype).to(ctx_.device), M, counts,
                       ratio_counts, depth_token_counts(h.loss_mask, plan_.model.mtp_num_layers)});
        continue;
      }
      mbs.push_back({h.tokens.to(at::kLong).to(ctx_.device), h.labels.to(at::kLong).to(ctx_.device),
                     h.loss_mask.to(ctx_.main_dtype).to(ctx_.device), M, counts, ratio_counts,
                     /*sequence_token_counts=*/{}});
    }
    return mbs;
  }

  // calculate_per_token_loss: [N_0, N_1 .. N_D], the valid tokens of the main mask and of each
  // depth k's mask rolled left k times (zero fill: the positions ≥ k of each row), summed over
  // every microbatch of data-parallel rank `dp`, or of every rank when dp < 0 (the global batch,
  // which every rank reads, so the count needs no collective; Megatron would all-reduce it).
  std::vector<double> step_token_counts(int64_t step, int dp) const {
    const int64_t D = plan_.model.mtp_num_layers;
    std::vector<double> n(static_cast<size_t>(1 + D), 0.0);
    const int first = dp < 0 ? 0 : dp, last = dp < 0 ? topo_.data_parallel_size() - 1 : dp;
    for (int64_t mb = 0; mb < plan_.num_microbatches; ++mb) {
      for (int r = first; r <= last; ++r) {
        const std::vector<double> m =
            depth_token_counts(host_microbatch(ctx_, step, mb, r).loss_mask, D);
        for (size_t k = 0; k < n.size(); ++k) n[k] += m[k];
      }
    }
    return n;
  }

  // The global batch [DP·M, b, s] in global microbatch order mb·DP + dp.
  void record_batch(int64_t step) {
    const int64_t DP = topo_.data_parallel_size(), M = plan_.num_microbatches;
    const int64_t b = plan_.model.micro_batch_size, s = plan_.model.seq_length;
    auto tokens = at::empty({DP * M, b, s}, at::kInt);
    auto labels = at::empty({DP * M, b, s}, at::kInt);
    auto mask = at::empty({DP * M, b, s}, at::kByte);
    for (int64_t mb = 0; mb < M; ++mb) {
      for (int64_t dp = 0; dp < DP; ++dp) {
        const HostMicrobatch h = host_microbatch(ctx_, step, mb, static_cast<int>(dp));
        tokens[mb * DP + dp].copy_(h.tokens);
        labels[mb * DP + dp].copy_(h.labels);
        mask[mb * DP + dp].copy_(h.loss_mask);
      }
    }
    recorder_->write_batch(step, tokens, labels, mask);
  }

  int loss_pipeline_rank() const {
    return (plan_.layout.num_stages() - 1) % plan_.layout.pipeline_size;
  }

  // Each replica's loss rank sends [M, 1 + D] float64 to the recording rank, which averages
  // them over the global batch in global microbatch order. With context parallel the losses
  // are the whole sequence's on every CP rank (model/loss.h); CP rank 0 sends them.
  void gather_losses(int64_t step, const StepLosses& losses, RunResult& result) {
    const int64_t M = plan_.num_microbatches;
    const int D = static_cast<int>(plan_.model.mtp_num_layers);
    const int DP = topo_.data_parallel_size();
    if (me_.pipeline_rank == loss_pipeline_rank() && rank_ != 0 && me_.context_parallel_rank == 0) {
      auto t = at::empty({M, 1 + D}, at::kDouble);
      auto acc = t.accessor<double, 2>();
      for (int64_t mb = 0; mb < M; ++mb) {
        acc[mb][0] = losses.lm[mb];
        for (int k = 0; k < D; ++k) acc[mb][1 + k] = losses.mtp[mb][k];
      }
      comm_.send(0, t.to(ctx_.device));
    }
    if (rank_ != 0) return;
    std::vector<double> lm(M * DP);
    std::vector<std::vector<double>> mtp(M * DP, std::vector<double>(D));
    for (int dp = 0; dp < DP; ++dp) {
      const int src = topo_.rank(loss_pipeline_rank(), dp);
      if (src == rank_) {
        for (int64_t mb = 0; mb < M; ++mb) {
          lm[mb * DP + dp] = losses.lm[mb];
          for (int k = 0; k < D; ++k) mtp[mb * DP + dp][k] = losses.mtp[mb][k];
        }
        continue;
      }
      const at::Tensor t = comm_.recv(src, {M, 1 + D}).cpu();
      auto acc = t.accessor<double, 2>();
      for (int64_t mb = 0; mb < M; ++mb) {
        lm[mb * DP + dp] = acc[mb][0];
        for (int k = 0; k < D; ++k) mtp[mb * DP + dp][k] = acc[mb][1 + k];
      }
    }
    result.total_loss.push_back(recorder_ ? recorder_->write_losses(step, lm, mtp)
                                          : average_losses(plan_, lm, mtp).total);
  }

  // The rank (data-parallel rank 0) whose copy of placement parameter `i` is recorded.
  bool record_copies() const { return plan_.training.record_copies && ctx_.options.write_record; }

  // /steps/<step>/copies: every copy but the recorded one (param_copies order), its holder's
  // weight sent to the recording rank (collective over every rank).
  void write_copies(int64_t step) {
    c10::NoGradGuard no_grad;
    std::vector<std::string> names;
    std::vector<at::Tensor> tensors;
    for (const ParamCopy& c : param_copies(placement_, plan_.data_parallel_size())) {
      const PlacedParam& p = placement_.params[c.param];
      const int holder = topo_.rank(c.stage % plan_.layout.pipeline_size, c.data_parallel_rank);
      at::Tensor t;
      if (holder == rank_) {
        const LocalParam* lp = model_.find(c.param, c.stage);
        MTP_INTERNAL_ASSERT(lp != nullptr, fmt::format("rank {} holds no copy {}", rank_, c.name));
        t = lp->weight.detach();
        if (rank_ != 0) comm_.send(0, t);
      } else if (rank_ == 0) {
        t = comm_.recv(holder, p.shape);
      }
      if (rank_ == 0) {
        names.push_back(c.name);
        tensors.push_back(t);
      }
    }
    if (rank_ == 0) recorder_->write_tensors(step, record::Group::kCopies, names, tensors);
  }

  // The recorded copy's holder: gradient-group member 0 of the owner stage's pipeline rank, or
  // for a routed expert under expert parallelism the member whose EP rank holds it.
  int owner_rank(const PlacedParam& p) const {
    const int pp = p.stages.front() % plan_.layout.pipeline_size;
    const int64_t e = config::routed_expert_index(p.name);
    if (e < 0 || topo_.expert_parallel_size() == 1) return topo_.grad_group_member(pp, 0);
    return topo_.grad_group_member(
        pp, model::expert_owner(e, plan_.model.num_moe_experts, topo_.expert_parallel_size()));
  }

  // Every parameter's tensor `of(copy)` (main grad, weight, optimizer moment) from its owner to
  // the recording rank, in canonical order; the recording rank writes each under
  // <group>/<name_of(parameter name)> and returns them.
  std::vector<at::Tensor> gather_params(
      int64_t step, record::Group group, const std::function<at::Tensor(const LocalParam&)>& of,
      const std::function<std::string(const std::string&)>& name_of = [](const std::string& n) {
        return n;
      }) {
    std::vector<at::Tensor> out;
    std::vector<std::string> names;
    for (size_t i = 0; i < placement_.params.size(); ++i) {
      const PlacedParam& p = placement_.params[i];
      const int owner = owner_rank(p);
      at::Tensor t;
      if (owner == rank_) {
        const LocalParam* lp = model_.find(i, p.stages.front());
        MTP_INTERNAL_ASSERT(lp != nullptr,
                            fmt::format("rank {} owns {} but holds no copy", rank_, p.name));
        t = of(*lp);
        if (rank_ != 0) comm_.send(0, t);
      } else if (rank_ == 0) {
        t = comm_.recv(owner, p.shape);
      }
      if (rank_ == 0) {
        names.push_back(name_of(p.name));
        out.push_back(t);
      }
    }
    // Written together once every tensor is here (received ones are copies; the recording
    // rank's own are unchanged until this returns): the digests of one group share a pass.
    if (rank_ == 0 && recorder_) recorder_->write_tensors(step, group, names, out);
    return out;
  }

  const RunContext& ctx_;
  const RunPlan& plan_;
  const Topology& topo_;
  const ParamPlacement& placement_;
  const int rank_;
  const RankCoord me_;
  collectives::Communicator comm_;
  /// The expert-parallel group's own endpoint: its all-to-alls may run on the combined 1F1B
  /// side thread while comm_ serves the rank's thread (a context-parallel gather).
  collectives::Communicator ep_comm_;
  std::unique_ptr<model::ContextParallel> cp_;  ///< CP > 1 only
  std::unique_ptr<model::ExpertParallel> ep_;   ///< EP > 1 only
  LocalModel model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<StepRecorder> recorder_;
  std::unique_ptr<MicrobatchGraph> graph_;           ///< cuda_graphs, one stage: kept across steps
  std::unique_ptr<PipelineGraphs> pipeline_graphs_;  ///< cuda_graphs, pipelined: the same
};

}  // namespace

RunResult run_variant(const RunPlan& plan, const Implementation& impl, const data::DataConfig& data,
                      const RunOptions& options) {
  apply_determinism();
  const auto t0 = std::chrono::steady_clock::now();
  RunContext ctx{plan,
                 impl,
                 options,
                 Topology(plan.pipeline_size(), plan.data_parallel_size(),
                          plan.context_parallel_size(), plan.expert_parallel_size()),
                 place_params(impl, plan.layout, plan.model),
                 load_start_state(plan),
                 options.batches ? nullptr : data::open_token_source(data),
                 options.batches,
                 {},
                 scalar_type(plan.training.dtype),
                 main_type(plan.training.dtype),
                 make_device(plan.training.device, options.device_index),
                 options.local_ranks.empty(),
                 t0};
  if (!ctx.batches) {
    ctx.batches =
        std::make_shared<data::MicrobatchBuilder>(*ctx.source, data, plan.model.micro_batch_size,
                                                  plan.model.seq_length, plan.model.vocab_size);
  }
  for (int i = 0; i < plan.layout.num_stages(); ++i) {
    const auto& s = plan.layout.stages[i];
    ctx.chunk_map.push_back(fmt::format("stage {} (pp {}, vpp {}): {}", i, s.pipeline_rank,
                                        s.virtual_stage,
                                        impl.describe_stage(plan.layout, i, plan.model)));
  }
  const int world = ctx.topology.world_size();
  std::vector<int> ranks = options.local_ranks;
  if (ranks.empty()) {
    for (int r = 0; r < world; ++r) ranks.push_back(r);
  }
  for (int r : ranks) {
    if (r < 0 || r >= world) {
      throw InputError(fmt::format("rank {} is outside the variant's world of {} ranks", r, world));
    }
  }
  std::unique_ptr<transport::Transport> own_transport;
  transport::Transport* tr = options.transport;
  if (tr == nullptr) {
    if (!ctx.single_process) {
      throw InputError("running a subset of the ranks needs a transport that connects them");
    }
    transport::InProcessOptions topt;
    topt.timeout = options.recv_timeout;
    topt.max_delay_us = plan.variant.transport_max_delay_us;
    topt.delay_seed = options.delay_seed;
    own_transport = transport::make_in_process_transport(world, topt);
    tr = own_transport.get();
  }
  if (tr->world_size() != world) {
    throw InputError(fmt::format("the transport connects {} ranks but the variant has {}",
                                 tr->world_size(), world));
  }

  RunResult result;
  result.plan = plan;
  result.record_path = options.record_path;
  result.chunk_map = ctx.chunk_map;
  // The run's CUDA graphs died with its rank workers; with every thread of the run joined, none
  // captures, so their memory pools can go back to the device (gpu::release_cached_memory says
  // why LibTorch may never do it on its own). Outside the run's wall time.
  const auto release_graph_pools = [&] {
    if (plan.variant.cuda_graphs && ctx.device.is_cuda()) {
      gpu::release_cached_memory(ctx.device.index() < 0 ? 0 : ctx.device.index());
    }
  };
  try {
    run_on_threads(
        static_cast<int>(ranks.size()),
        [&](int i) {
          pin_thread_determinism();
          RankWorker worker(ctx, *tr, ranks[i]);
          worker.run(result);
        },
        [&](int i, const std::string& why) {
          tr->abort(fmt::format("rank {} failed: {}", ranks[i], why));
        });
  } catch (...) {
    try {
      release_graph_pools();
    } catch (const std::exception&) {
      // The run's own error is the one to report.
    }
    throw;
  }
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  release_graph_pools();
  return result;
}

}  // namespace mtp::engine
