#include "harness/cli/calibrate_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "harness/cli/commands.h"
#include "harness/common/error.h"
#include "harness/common/system_memory.h"
#include "harness/config/param_specs.h"
#include "harness/gpu/device_clock.h"

namespace mtp::cli {
namespace {

/// Initial weights made fast: a block of 2^20 normal values with each parameter's std repeated
/// over the tensor (norms 1). The values change no node's time (with top-k = experts every token
/// reaches every local expert), and a DeepSeek-V3 slice's 4.7e9 values drawn one by one take
/// minutes.
engine::InitialWeights quick_weights(const config::ModelConfig& cfg) {
  engine::InitialWeights w;
  w.specs = config::parameter_specs(cfg);
  at::Generator gen = at::detail::createCPUGenerator(1234);
  const at::Tensor block = at::empty({int64_t{1} << 20}, at::kDouble).normal_(0.0, 1.0, gen);
  for (const auto& spec : w.specs) {
    at::Tensor v = at::empty(spec.shape, at::kDouble);
    if (spec.init_std == 0.0) {
      v.fill_(1.0);
    } else {
      at::Tensor flat = v.view({-1});
      const int64_t n = flat.numel(), k = block.numel();
      for (int64_t at0 = 0; at0 < n; at0 += k) {
        const int64_t len = std::min(k, n - at0);
        flat.narrow(0, at0, len).copy_(block.narrow(0, 0, len)).mul_(spec.init_std);
      }
    }
    w.values.push_back(v);
  }
  return w;
}

}  // namespace

struct Stopwatch::Impl {
  std::unique_ptr<gpu::DeviceClock> clock;                  // CUDA
  std::mutex mu;                                            // guards host
  std::vector<std::chrono::steady_clock::time_point> host;  // every mark's host time
  double host_ms(int a, int b) {                            // under mu
    const auto n = static_cast<int>(host.size());
    if (a < 0 || b < 0 || a >= n || b >= n) {
      throw InfraError(
          fmt::format("Stopwatch: marks {} and {} are not both among the {} marks", a, b, n));
    }
    return std::chrono::duration<double, std::milli>(host[static_cast<size_t>(b)] -
                                                     host[static_cast<size_t>(a)])
        .count();
  }
};

Stopwatch::Stopwatch(bool cuda) : impl_(std::make_unique<Impl>()) {
  if (cuda) impl_->clock = std::make_unique<gpu::DeviceClock>(0);
}

Stopwatch::~Stopwatch() = default;

int Stopwatch::mark() {
  std::lock_guard<std::mutex> lock(impl_->mu);  // the device mark and the host's share an index
  impl_->host.push_back(std::chrono::steady_clock::now());
  if (impl_->clock) return impl_->clock->mark();
  return static_cast<int>(impl_->host.size()) - 1;
}

double Stopwatch::elapsed_ms(int a, int b) {
  if (impl_->clock) return impl_->clock->elapsed_ms(a, b);
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->host_ms(a, b);
}

double Stopwatch::host_elapsed_ms(int a, int b) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->host_ms(a, b);
}

void Stopwatch::clear() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->clock) impl_->clock->clear();
  impl_->host.clear();
}

void TimedModel::reset_grads() {
  for (const auto& c : chunks) {
    for (const auto& entry : c->params().entries()) entry.second.mutable_grad().reset();
  }
}

engine::RunPlan plan_timed_model(const config::ModelConfig& cfg, const std::string& layout,
                                 int pipeline_size, int num_microbatches, bool cuda,
                                 config::Implementation implementation, bool cuda_graphs) {
  config::TrainingConfig training;
  training.device = cuda ? config::Device::kCuda : config::Device::kCpu;
  training.dtype = cuda ? config::DType::kBFloat16 : config::DType::kFloat32;
  training.num_microbatches = num_microbatches;
  config::VariantSpec variant;
  variant.name = "calibrate";
  variant.implementation = implementation;
  variant.layout = layout;
  variant.pipeline_size = pipeline_size;
  variant.kernels = config::Kernels::kHarness;
  variant.cuda_graphs = cuda_graphs;
  config::ModelConfig model = cfg;
  model.kernels = config::Kernels::kHarness;
  model.attention_backend =
      cuda ? config::AttentionBackend::kFlash : config::AttentionBackend::kUnfused;
  auto impl = make_implementation(variant.implementation);
  return engine::plan_variant(model, training, variant, *impl);
}

TimedModel build_timed_model(const config::ModelConfig& cfg, const std::string& layout,
                             int pipeline_size, int num_microbatches, bool cuda,
                             config::Implementation implementation, bool cuda_graphs) {
  TimedModel t;
  t.plan = plan_timed_model(cfg, layout, pipeline_size, num_microbatches, cuda, implementation,
                            cuda_graphs);
  auto impl = make_implementation(implementation);
  if (!cuda) {
    // On the CPU the model, its float64 initial values and the saved activations share the
    // host's memory: refuse a slice that cannot fit (a DeepSeek-V3 one) before allocating it.
    const engine::ResourceEstimate est = engine::estimate_resources(t.plan, *impl);
    engine::require_resources(
        est, /*all_ranks_share_memory=*/true, available_memory_bytes(),
        "the CPU memory available (MemAvailable / cgroup limit / ulimit -v and -d)",
        /*disk_free=*/0,
        fmt::format("calibrate: the timed model (layout {}, H {}, V {}, {} parameters)", layout,
                    t.plan.model.hidden_size, t.plan.model.vocab_size, est.parameters),
        "time this preset on a GPU, --device cuda, where the weights live in device memory");
  }
  t.device = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  t.chunks = impl->build_chunks(t.plan.layout, t.plan.model, quick_weights(t.plan.model),
                                cuda ? at::kBFloat16 : at::kFloat, t.device);
  const config::ModelConfig& model = t.plan.model;
  const int64_t b = model.micro_batch_size, s = model.seq_length;
  for (int i = 0; i < num_microbatches; ++i) {
    engine::MicrobatchTensors mb;
    mb.tokens = at::randint(0, model.vocab_size, {b, s}, at::kLong).to(t.device);
    mb.labels = at::randint(0, model.vocab_size, {b, s}, at::kLong).to(t.device);
    mb.loss_mask = at::ones({b, s}, at::kFloat).to(t.device);
    mb.num_microbatches = num_microbatches;
    t.microbatches.push_back(std::move(mb));
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace mtp::cli
