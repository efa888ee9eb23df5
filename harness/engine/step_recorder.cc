#include "harness/engine/step_recorder.h"

#include <c10/core/Event.h>
#include <c10/core/GradMode.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "harness/common/error.h"
#include "harness/config/hyperparameters.h"
#include "harness/engine/block_summary.h"
#include "harness/engine/determinism.h"
#include "harness/engine/dtypes.h"
#include "harness/engine/git_revision.h"
#include "harness/engine/resource_estimate.h"
#include "harness/gpu/gpu.h"
#include "kernels/ops.h"

namespace mtp::engine {
namespace {

void write_attributes(record::RecordWriter& rec, const RunPlan& plan,
                      const data::MicrobatchSource& source, const RecordContext& ctx) {
  const config::ModelConfig& cfg = plan.model;
  const config::TrainingConfig& training = plan.training;
  const layout::PipelineLayout& layout = plan.layout;
  // Hyperparameters under Megatron's argument names (config/hyperparameters.h); clip_grad and
  // the record mode as this variant trains (a variant's override, the command line's mode).
  auto set = [&rec](const char* attr, const config::RecordedValue& v) {
    std::visit([&](const auto& x) { rec.set_attr(attr, x); }, v);
  };
  for (const auto& h : config::model_hyperparameters()) {
    if (h.record_attr != nullptr && (!h.moe_only || cfg.num_moe_experts > 0)) {
      set(h.record_attr, h.recorded(cfg));
    }
  }
  config::TrainingConfig as_trained = training;
  as_trained.clip_grad = plan.clip_grad;
  as_trained.record = plan.record_mode;
  for (const auto& h : config::training_hyperparameters()) {
    if (h.record_attr != nullptr) set(h.record_attr, h.recorded(as_trained));
  }
  // The variant.
  rec.set_attr("variant", plan.variant.name);
  rec.set_attr("implementation", ctx.implementation);
  rec.set_attr("layout", layout.text);
  rec.set_attr("P", int64_t{layout.pipeline_size});
  rec.set_attr("V", int64_t{layout.virtual_size});
  rec.set_attr("M", plan.num_microbatches);
  rec.set_attr("global_batch_size",
               plan.num_microbatches * cfg.micro_batch_size * plan.data_parallel_size());
  rec.set_attr("data_parallel_size", int64_t{plan.data_parallel_size()});
  rec.set_attr("world_size", int64_t{plan.world_size()});
  // Only when on, so that the records of runs without CP keep their attributes.
  if (plan.context_parallel_size() > 1) {
    rec.set_attr("context_parallel_size", int64_t{plan.context_parallel_size()});
  }
  if (plan.expert_parallel_size() > 1) {
    rec.set_attr("expert_model_parallel_size", int64_t{plan.expert_parallel_size()});
  }
  rec.set_attr("optimizer", config::enum_name(plan.variant.optimizer));
  rec.set_attr("use_distributed_optimizer",
               int64_t{plan.variant.optimizer == config::Optimizer::kDistributedAdam ? 1 : 0});
  rec.set_attr("embedding_copy_update", config::enum_name(plan.variant.embedding_copy_update));
  rec.set_attr("ddp_bucket_size", plan.variant.ddp_bucket_size);
  rec.set_attr("microbatch_group_size", int64_t{plan.microbatch_group_size()});
  rec.set_attr("schedule", schedule::schedule_kind_name(plan.schedule.kind));
  rec.set_attr("overlap_p2p_comm", int64_t{plan.variant.overlap_p2p ? 1 : 0});
  // Only when on, so that the records of runs without graphs keep their attributes.
  if (plan.variant.cuda_graphs) rec.set_attr("cuda_graphs", int64_t{1});
  rec.set_attr("mtp_standalone", int64_t{layout.mtp_standalone ? 1 : 0});
  // A planted bug (config/fault.h) is named, so that nobody takes the record for a correct run.
  if (plan.model.inject != config::Fault::kNone) {
    rec.set_attr("inject", config::enum_name(plan.model.inject));
  }
  rec.set_attr("accumulation", config::enum_name(plan.model.accumulation));
  rec.set_attr("execution", ctx.execution);
  rec.set_attr("data_source", source.describe());
  rec.set_attr("data_sha256", source.sha256());
  for (const auto& [k, v] : ctx.start_attrs) rec.set_attr(k, v);
  rec.set_attr("git_revision", std::string(git_revision()));
  rec.set_attr("chunk_map", fmt::format("{}", fmt::join(ctx.chunk_map, "\n")));
  for (const auto& [k, v] : determinism_fingerprint()) rec.set_attr(k, v);
  if (training.device == config::Device::kCuda) {
    for (const auto& [k, v] : gpu::gpu_fingerprint(ctx.device_index)) rec.set_attr(k, v);
  }
  rec.set_attr("scenario", ctx.scenario_name);
  rec.set_attr("scenario_text", ctx.scenario_text);
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [name, st] : ctx.param_stages) stages[name] = st;
  rec.set_attr("param_stages", stages.dump());
  nlohmann::json coords = nlohmann::json::array();
  for (const auto& [pp, vpp] : ctx.stage_coords) coords.push_back({pp, vpp});
  rec.set_attr("stage_coords", coords.dump());
}

}  // namespace

/// The writer thread and its queue of snapshots (step_recorder.h).
struct StepRecorder::Writer {
  /// One queued write: a snapshot of a tensor (or nothing, for attributes) and what to do with
  /// it on the writer thread.
  struct Job {
    at::Tensor snapshot;              ///< contiguous; on the device it was recorded from
    std::optional<c10::Event> ready;  ///< CUDA: recorded after the snapshot's clone
    uint64_t bytes = 0;
    std::function<void(record::RecordWriter&, const at::Tensor& host)> run;
  };

  explicit Writer(const std::string& path)
      : file(std::make_unique<record::RecordWriter>(path)), thread([this] { loop(); }) {}

  ~Writer() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }

  void submit(Job job) {
    std::unique_lock<std::mutex> lock(mu);
    // Back-pressure: a job that alone exceeds the limit still goes when the queue is empty.
    space.wait(lock,
               [&] { return error || jobs.empty() || in_flight + job.bytes <= kMaxBytesInFlight; });
    if (error) std::rethrow_exception(error);
    in_flight += job.bytes;
    jobs.push_back(std::move(job));
    cv.notify_all();
  }

  /// Waits until every job ran; rethrows the writer thread's failure.
  void drain() {
    std::unique_lock<std::mutex> lock(mu);
    space.wait(lock, [&] { return error || (jobs.empty() && !busy); });
    if (error) std::rethrow_exception(error);
  }

  /// The snapshot's bytes on the host: itself on the CPU; on CUDA a copy on a stream of the
  /// writer's own, after the event that follows the clone.
  at::Tensor to_host(const Job& job) {
    if (!job.snapshot.defined() || !job.snapshot.is_cuda()) return job.snapshot;
    const c10::Device device = job.snapshot.device();
    if (!side_stream || side_stream->device() != device) {
      c10::impl::VirtualGuardImpl impl(device.type());
      side_stream = impl.getStreamFromGlobalPool(device);
    }
    job.ready->block(*side_stream);
    c10::StreamGuard guard(*side_stream);
    at::Tensor host = at::empty(job.snapshot.sizes(),
                                job.snapshot.options().device(at::kCPU).pinned_memory(true));
    host.copy_(job.snapshot);  // synchronous on the side stream
    return host;
  }

  void loop() {
    while (true) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !jobs.empty(); });
        if (stop) return;  // after commit(), or abandoned after a failure: nothing to write
        job = std::move(jobs.front());
        jobs.pop_front();
        busy = true;
      }
      try {
        if (!error_seen()) {
          const at::Tensor host = to_host(job);
          job.run(*file, host);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      const uint64_t done = job.bytes;
      job = Job();  // the snapshot (device memory too) is released here, after its copy
      {
        std::lock_guard<std::mutex> lock(mu);
        in_flight -= std::min(in_flight, done);
        busy = false;
      }
      space.notify_all();
    }
  }

  bool error_seen() {
    std::lock_guard<std::mutex> lock(mu);
    return error != nullptr;
  }

  std::unique_ptr<record::RecordWriter> file;  // touched by the writer thread only (and commit)
  std::mutex mu;
  std::condition_variable cv, space;
  std::deque<Job> jobs;
  uint64_t in_flight = 0;
  bool busy = false, stop = false;
  std::exception_ptr error;
  std::optional<c10::Stream> side_stream;  // writer thread only
  std::thread thread;                      // last: starts after everything above exists
};

StepRecorder::StepRecorder(const std::string& path, const RunPlan& plan,
                           const data::MicrobatchSource& source, const RecordContext& context)
    : plan_(plan),
      default_storage_(default_step_storage(plan)),
      loss_dtype_(context.loss_dtype ? scalar_type(*context.loss_dtype)
                                     : main_type(plan.training.dtype)),
      writer_(std::make_unique<Writer>(path)) {
  write_attributes(*writer_->file, plan, source, context);
}

StepRecorder::~StepRecorder() = default;

void StepRecorder::write_batch(int64_t step, const at::Tensor& tokens, const at::Tensor& labels,
                               const at::Tensor& loss_mask) {
  const at::Tensor* batch[] = {&tokens, &labels, &loss_mask};
  for (size_t i = 0; i < record::kBatchTensorNames.size(); ++i) {
    write_tensor(step, record::Group::kBatch, record::kBatchTensorNames[i], *batch[i]);
  }
}

StepLossAverages average_losses(const RunPlan& plan, const std::vector<double>& lm_per_mb,
                                const std::vector<std::vector<double>>& mtp_per_mb) {
  const int D = static_cast<int>(plan.model.mtp_num_layers);
  // Per-token loss: each microbatch's value is already its share of the global token mean
  // (model/loss.h), so the shares are summed; otherwise per-microbatch means are averaged.
  const auto K = plan.model.calculate_per_token_loss ? 1.0 : static_cast<double>(lm_per_mb.size());
  // Per-microbatch values averaged (or summed) in microbatch order (float64).
  StepLossAverages a;
  for (double v : lm_per_mb) a.lm += v;
  a.lm /= K;
  a.mtp.assign(D, 0.0);
  for (int k = 0; k < D; ++k) {
    for (const auto& per_depth : mtp_per_mb) a.mtp[k] += per_depth[k];
    a.mtp[k] /= K;
  }
  double mtp_sum = 0.0;
  for (double v : a.mtp) mtp_sum += v;
  a.total = a.lm;
  if (D > 0) a.total += plan.model.mtp_loss_scaling_factor / static_cast<double>(D) * mtp_sum;
  return a;
}

double StepRecorder::write_losses(int64_t step, const std::vector<double>& lm_per_mb,
                                  const std::vector<std::vector<double>>& mtp_per_mb) {
  const StepLossAverages a = average_losses(plan_, lm_per_mb, mtp_per_mb);
  const int D = static_cast<int>(plan_.model.mtp_num_layers);
  const double lm = a.lm, total = a.total;
  const std::vector<double>& mtp = a.mtp;
  // Averages are taken in float64, then stored in the training dtype (fp32 for bf16 runs, whose
  // losses are computed in fp32) so that ulp:N counts units of that dtype.
  auto scalar = [this](double v) { return at::scalar_tensor(v, at::kDouble).to(loss_dtype_); };
  write_tensor(step, record::Group::kLoss, record::kLmLossName, scalar(lm));
  for (int k = 0; k < D; ++k) {
    write_tensor(step, record::Group::kLoss, record::mtp_loss_name(k + 1), scalar(mtp[k]));
  }
  write_tensor(step, record::Group::kLoss, record::kTotalLossName, scalar(total));
  return total;
}

void StepRecorder::write_tensor(int64_t step, record::Group group, const std::string& name,
                                const at::Tensor& t) {
  write_tensors(step, group, {name}, {t});
}

void StepRecorder::write_tensors(int64_t step, record::Group group_id,
                                 const std::vector<std::string>& names,
                                 const std::vector<at::Tensor>& tensors) {
  MTP_INTERNAL_ASSERT(names.size() == tensors.size(),
                      fmt::format("{} names for {} tensors", names.size(), tensors.size()));
  const bool always_full = group_id == record::Group::kBatch || group_id == record::Group::kLoss;
  const record::Storage storage =
      always_full ? record::Storage::kFull : step_storage(plan_, step, default_storage_);
  // A digest-only tensor on a GPU is digested there (kernels::block_summaries, on the current
  // stream, so before anything later changes it): 40 bytes per block go to the host instead of
  // a snapshot of the tensor (block_summary.h). Consecutive ones on one device share a pass.
  auto on_device = [&](size_t i) {
    return storage == record::Storage::kDigest && tensors[i].is_cuda();
  };
  for (size_t i = 0; i < tensors.size();) {
    if (!on_device(i)) {
      write_snapshot(step, group_id, names[i], tensors[i], storage);
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < tensors.size() && on_device(end) && tensors[end].device() == tensors[i].device()) {
      ++end;
    }
    write_device_digests(step, group_id, names, tensors, i, end);
    i = end;
  }
}

namespace {

/// A CUDA event on the snapshot's device's current stream, after the work that made it.
std::optional<c10::Event> ready_event(const at::Tensor& snapshot) {
  if (!snapshot.is_cuda()) return std::nullopt;
  c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
  std::optional<c10::Event> ready;
  ready.emplace(c10::DeviceType::CUDA);
  ready->record(impl.getStream(snapshot.device()));
  return ready;
}

}  // namespace

void StepRecorder::write_snapshot(int64_t step, record::Group group_id, const std::string& name,
                                  const at::Tensor& t, record::Storage storage) {
  const std::string group = record::group_name(group_id);
  const record::DType dtype = record_dtype(t.scalar_type(), name);
  const int s = static_cast<int>(step);
  Writer::Job job;
  {
    c10::NoGradGuard no_grad;
    job.snapshot = t.detach().clone(at::MemoryFormat::Contiguous);
  }
  job.ready = ready_event(job.snapshot);
  job.bytes = job.snapshot.nbytes();
  job.run = [s, group, name, dtype, storage](record::RecordWriter& w, const at::Tensor& host) {
    record::TensorView v{name, dtype, host.sizes().vec(), host.data_ptr(), host.nbytes()};
    const record::TensorDigest d = record::digest_bytes(v.data, v.nbytes, record::dtype_size(dtype),
                                                        record::default_digest_threads());
    w.write(s, group, v, storage, &d);
  };
  writer_->submit(std::move(job));
}

void StepRecorder::write_device_digests(int64_t step, record::Group group_id,
                                        const std::vector<std::string>& names,
                                        const std::vector<at::Tensor>& tensors, size_t begin,
                                        size_t end) {
  /// What the writer thread needs of one tensor besides its rows.
  struct Entry {
    std::string name;
    record::DType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    int element_size;
    int64_t first_row, rows;
  };
  std::vector<Entry> entries;
  std::vector<at::Tensor> detached;
  for (size_t i = begin; i < end; ++i) {
    const at::Tensor& t = tensors[i];
    entries.push_back({names[i], record_dtype(t.scalar_type(), names[i]), t.sizes().vec(),
                       static_cast<uint64_t>(t.numel()) * t.element_size(),
                       static_cast<int>(t.element_size()), 0, 0});
    detached.push_back(t.detach());
  }
  kernels::BlockSummaryBatch batch;
  {
    c10::NoGradGuard no_grad;
    batch = kernels::block_summaries(detached, record::kDigestBlockElements);
  }
  for (size_t k = 0; k < entries.size(); ++k) {
    entries[k].first_row = batch.first_row[k];
    entries[k].rows = batch.first_row[k + 1] - batch.first_row[k];
  }
  Writer::Job job;
  job.snapshot = batch.rows;
  job.ready = ready_event(job.snapshot);
  job.bytes = job.snapshot.nbytes();
  job.run = [s = static_cast<int>(step), group = record::group_name(group_id),
             entries = std::move(entries)](record::RecordWriter& w, const at::Tensor& host) {
    for (const Entry& e : entries) {
      const BlockSummary b =
          decode_block_summaries(host.narrow(0, e.first_row, e.rows), e.element_size);
      w.write(s, group, record::TensorView{e.name, e.dtype, e.shape, nullptr, e.nbytes},
              record::Storage::kDigest, &b.digest, 1, &b.nonfinite);
    }
  };
  writer_->submit(std::move(job));
}

void StepRecorder::set_step_attr(int64_t step, const std::string& key, double value) {
  Writer::Job job;
  const int s = static_cast<int>(step);
  job.run = [s, key, value](record::RecordWriter& w, const at::Tensor&) {
    w.set_step_attr(s, key, value);
  };
  writer_->submit(std::move(job));
}

void StepRecorder::commit() {
  writer_->drain();
  writer_->file->commit();
}

}  // namespace mtp::engine
