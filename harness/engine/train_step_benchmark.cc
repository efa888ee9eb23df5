// File: harness/engine/train_step_benchmark.cc
//
// Training-step throughput of the two MTP placements and of the two kernel sets, with all P = 4
// pipeline ranks as threads of this process (in-process transport; on CUDA all on GPU 0).
//
//   BM_PipelineStep/<placement>/<kernels>/<dev>/H:_/s:_/M:_
//       One step's forward and backward passes: run_pipeline_step() over the M microbatches
//       through the interleaved schedule (P = 4, V = 2), grads accumulated into the chunks'
//       parameters. The model, the microbatches and the transport are built once, untimed; one
//       untimed step warms up. Excludes the embedding-group grad sum, the optimizer and the
//       record, i.e. what differs between placements and kernel sets.
//   BM_TrainStep/<placement>/<kernels>/<dev>/H:_/s:_/M:_/extra_steps:k
//       One optimizer step end to end through run_variant(): (RunResult.wall_seconds of a
//       steps = 1 + k run − that of a steps = 1 run) / k, for the same variant. Setup (initial
//       weights, chunks, record header and step-0 weights) and step 1 cancel out; what remains is
//       the mean of k steady-state steps: forward and backward, embedding-group grad sum, Adam,
//       and writing the step's batch, losses, grads and weights to the HDF5 record (the record
//       cannot be switched off; it is written under $TMPDIR and deleted). k = 3 divides the
//       run-to-run noise of the setup by 3. One iteration (two runs).
//
// Placements (ModelConfig D = 1):
//   reference  MTP with the loss, layout "E|t*3|(t|)*5mL", P = 4, V = 2
//   candidate  MTP in a standalone stage, layout "E|t*3|(t|)*4tm|L", P = 4, V = 2
// Kernels: "torch" (LibTorch ops) or "harness" (kernels/ops.h), ModelConfig::kernels.
// Sizes: tiny on the CPU (H 64, 8 layers, 4 heads, F 128, V 256, s 32, b 1, M 8);
// large on CUDA (H 1024, 8 layers, 16 heads, F 4096, V 32768, s 2048, b 1, M 8). float32.
// Data: the default byte-level GPL-3 text (35 KB; 2048-token windows wrap around), or 64 KiB of
// pseudo-random bytes where that file is missing.
//
// Time: manual, seconds per step; host clock around the step with a device sync on both sides
// (bench_common.h). Counters: tokens_per_second = M·b·s / step time; for BM_PipelineStep also
// parameters (unique, incl. MTP); for BM_TrainStep also wall_short_s and wall_long_s (the
// steps = 1 and steps = 1 + k runs) and record_MB_per_step (the record's growth per extra step).
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/testing/benchmark_util.h"
#include "candidate/candidate.h"
#include "harness/data/microbatch.h"
#include "harness/data/token_source.h"
#include "harness/engine/chunk.h"
#include "harness/engine/determinism.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/trainer.h"
#include "harness/config/model_config.h"
#include "harness/transport/transport.h"
#include "reference/reference.h"

namespace {

namespace fs = std::filesystem;
using mtp::bench::bench_device;
using mtp::bench::Dev;
using mtp::bench::dev_name;
using mtp::bench::DeviceTimer;

constexpr uint64_t kSeed = 1234;
constexpr int kPipelineSize = 4;

/// ModelSize: the model and step shape a benchmark trains (b = 1, D = 1, float32).
struct ModelSize {
  int64_t hidden, layers, heads, ffn, vocab, seq, microbatches;
};
constexpr ModelSize kTiny{64, 8, 4, 128, 256, 32, 8};
constexpr ModelSize kLarge{1024, 8, 16, 4096, 32768, 2048, 8};

/// Placement: an implementation and the P = 4, V = 2 layout it runs.
struct Placement {
  const char* name;
  const char* layout;
};
constexpr Placement kReference{"reference", "E|t*3|(t|)*5mL"};
constexpr Placement kCandidate{"candidate", "E|t*3|(t|)*4tm|L"};

std::unique_ptr<mtp::engine::Implementation> make_implementation(const Placement& p) {
  return std::string(p.name) == "reference" ? mtp::reference::make_reference()
                                            : mtp::candidate::make_candidate();
}

mtp::config::ModelConfig model_config(const ModelSize& s, const std::string& kernels) {
  mtp::config::ModelConfig cfg;
  cfg.num_layers = s.layers;
  cfg.hidden_size = s.hidden;
  cfg.ffn_hidden_size = s.ffn;
  cfg.num_attention_heads = s.heads;
  cfg.num_query_groups = s.heads;
  cfg.vocab_size = s.vocab;
  cfg.seq_length = s.seq;
  cfg.micro_batch_size = 1;
  cfg.mtp_num_layers = 1;
  cfg.kernels = mtp::config::parse_enum<mtp::config::Kernels>(kernels);
  cfg.validate();
  return cfg;
}

mtp::config::VariantSpec variant_spec(const Placement& p, const std::string& kernels) {
  mtp::config::VariantSpec v;
  v.name = std::string(p.name) + "_p4v2_" + kernels;
  v.implementation = mtp::config::parse_enum<mtp::config::Implementation>(p.name);
  v.layout = p.layout;
  v.pipeline_size = kPipelineSize;
  v.kernels = mtp::config::parse_enum<mtp::config::Kernels>(kernels);
  return v;
}

/// TempDir: a fresh directory under std::filesystem::temp_directory_path() ($TMPDIR), removed
/// with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "mtp-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("cannot create a temporary directory from " + tmpl);
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// The default text source when its file exists; otherwise 64 KiB of bytes from a fixed LCG,
/// written to `dir`.
mtp::data::DataConfig bench_data(const fs::path& dir) {
  mtp::data::DataConfig cfg;
  if (std::ifstream(cfg.path).good()) return cfg;
  cfg.path = (dir / "corpus.bin").string();
  std::ofstream out(cfg.path, std::ios::binary);
  uint64_t x = kSeed;
  for (int i = 0; i < (1 << 16); ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    out.put(static_cast<char>(x >> 56));
  }
  if (!out) throw std::runtime_error("cannot write " + cfg.path);
  return cfg;
}

/// Step 1's M microbatches on `device`, as the trainer builds them.
std::vector<mtp::engine::MicrobatchTensors> microbatches(
    const mtp::data::MicrobatchBuilder& builder, const mtp::config::ModelConfig& cfg, int64_t M,
    const at::Device& device) {
  std::vector<mtp::engine::MicrobatchTensors> mbs;
  const int64_t b = cfg.micro_batch_size, s = cfg.seq_length;
  for (int64_t mb = 0; mb < M; ++mb) {
    mtp::data::Microbatch m = builder.build(/*step=*/1, mb, M);
    auto tokens = at::empty({b, s}, at::kInt), labels = at::empty({b, s}, at::kInt);
    auto mask = at::empty({b, s}, at::kByte);
    std::copy(m.tokens.begin(), m.tokens.end(), tokens.data_ptr<int32_t>());
    std::copy(m.labels.begin(), m.labels.end(), labels.data_ptr<int32_t>());
    std::copy(m.loss_mask.begin(), m.loss_mask.end(), mask.data_ptr<uint8_t>());
    mbs.push_back({tokens.to(at::kLong).to(device), labels.to(at::kLong).to(device),
                   mask.to(at::kFloat).to(device), M});
  }
  return mbs;
}

/// M·b·s: the tokens of one step.
int64_t tokens_per_step(const mtp::config::ModelConfig& cfg, const ModelSize& size) {
  return size.microbatches * cfg.micro_batch_size * cfg.seq_length;
}

int64_t count_parameters(const mtp::engine::InitialWeights& init) {
  int64_t n = 0;
  for (const auto& v : init.values) n += v.numel();
  return n;
}

/// Creates the CUDA context and a cuBLAS handle before anything is timed (after
/// apply_determinism(), which sets CUBLAS_WORKSPACE_CONFIG).
void warm_device(const at::Device& device) {
  if (!device.is_cuda()) return;
  auto a = at::ones({64, 64}, at::TensorOptions().dtype(at::kFloat).device(device));
  (void)at::mm(a, a).sum().cpu();
}

/// BM_PipelineStep: forward + backward of one step (run_pipeline_step), see the file comment.
void BM_PipelineStep(benchmark::State& state, Placement placement, std::string kernels, Dev dev,
                     ModelSize size) {
  if (auto why = mtp::bench::device_unavailable(dev)) {
    state.SkipWithError(why->c_str());
    return;
  }
  try {
    TempDir tmp;
    const at::Device device = bench_device(dev);
    warm_device(device);
    const mtp::config::ModelConfig cfg = model_config(size, kernels);
    const mtp::config::VariantSpec variant = variant_spec(placement, kernels);
    auto impl = make_implementation(placement);
    mtp::config::TrainingConfig training;
    training.num_microbatches = size.microbatches;
    const mtp::engine::RunPlan plan = mtp::engine::plan_variant(cfg, training, variant, *impl);
    const mtp::layout::PipelineLayout& layout = plan.layout;
    const mtp::schedule::ScheduleConfig& sched = plan.schedule;
    auto source = mtp::data::open_token_source(bench_data(tmp.path()));
    mtp::data::MicrobatchBuilder builder(*source, cfg.micro_batch_size, cfg.seq_length,
                                         cfg.vocab_size, /*mask_token=*/-1);
    const mtp::engine::InitialWeights init = mtp::engine::make_initial_weights(cfg, kSeed);
    auto chunks = impl->build_chunks(layout, cfg, init, at::kFloat, device);
    const auto mbs = microbatches(builder, cfg, size.microbatches, device);
    mtp::transport::InProcessOptions topt;
    topt.timeout = std::chrono::milliseconds(600000);
    auto transport = mtp::transport::make_in_process_transport(layout.pipeline_size, topt);
    auto reset_grads = [&] {
      for (const auto& c : chunks) {
        for (const auto& entry : c->params().entries()) entry.second.mutable_grad().reset();
      }
    };
    DeviceTimer timer(device);
    mtp::engine::run_pipeline_step(chunks, layout, sched, mbs, *transport);  // warm-up
    reset_grads();
    double seconds = 0.0;
    for (auto _ : state) {
      timer.Start();
      mtp::engine::run_pipeline_step(chunks, layout, sched, mbs, *transport);
      const double t = timer.Stop();
      state.SetIterationTime(t);
      seconds += t;
      reset_grads();
    }
    const double tokens = static_cast<double>(tokens_per_step(cfg, size));
    state.counters["tokens_per_second"] =
        tokens * static_cast<double>(state.iterations()) / seconds;
    state.counters["parameters"] = static_cast<double>(count_parameters(init));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

/// BM_TrainStep: one optimizer step end to end, (wall(steps = 1 + k) − wall(steps = 1)) / k of
/// run_variant() with k = state.range(0), see the file comment.
void BM_TrainStep(benchmark::State& state, Placement placement, std::string kernels, Dev dev,
                  ModelSize size) {
  if (auto why = mtp::bench::device_unavailable(dev)) {
    state.SkipWithError(why->c_str());
    return;
  }
  try {
    const int64_t extra_steps = state.range(0);
    TempDir tmp;
    warm_device(bench_device(dev));
    const mtp::config::ModelConfig cfg = model_config(size, kernels);
    const mtp::config::VariantSpec variant = variant_spec(placement, kernels);
    auto impl = make_implementation(placement);
    const mtp::data::DataConfig data = bench_data(tmp.path());
    mtp::config::TrainingConfig training;
    training.num_microbatches = size.microbatches;
    training.seed = kSeed;
    training.dtype = mtp::config::DType::kFloat32;
    training.device = mtp::config::parse_enum<mtp::config::Device>(dev_name(dev));
    // One run of `steps` steps; returns its wall seconds and record size, record deleted.
    auto run = [&](int64_t steps, double* wall, double* record_bytes) {
      training.steps = steps;
      mtp::engine::RunOptions options;
      options.record_path = (tmp.path() / ("steps" + std::to_string(steps) + ".h5")).string();
      options.scenario_name = "train_step_benchmark";
      options.recv_timeout = std::chrono::milliseconds(600000);
      const mtp::engine::RunResult r = mtp::engine::run_variant(
          mtp::engine::plan_variant(cfg, training, variant, *impl), *impl, data, options);
      *wall = r.wall_seconds;
      *record_bytes = static_cast<double>(fs::file_size(options.record_path));
      fs::remove(options.record_path);
    };
    double wall_short = 0, wall_long = 0, bytes_short = 0, bytes_long = 0, seconds = 0;
    for (auto _ : state) {
      run(1, &wall_short, &bytes_short);
      run(1 + extra_steps, &wall_long, &bytes_long);
      const double t = std::max((wall_long - wall_short) / static_cast<double>(extra_steps), 1e-9);
      state.SetIterationTime(t);
      seconds += t;
    }
    const double tokens = static_cast<double>(tokens_per_step(cfg, size));
    state.counters["tokens_per_second"] =
        tokens * static_cast<double>(state.iterations()) / seconds;
    state.counters["wall_short_s"] = wall_short;
    state.counters["wall_long_s"] = wall_long;
    state.counters["record_MB_per_step"] =
        (bytes_long - bytes_short) / static_cast<double>(extra_steps) / 1e6;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void register_benchmarks() {
  for (Dev dev : {Dev::kCpu, Dev::kCuda}) {
    const ModelSize size = dev == Dev::kCpu ? kTiny : kLarge;
    const std::string tail = "/" + std::string(dev_name(dev)) + "/H:" +
                             std::to_string(size.hidden) + "/s:" + std::to_string(size.seq) +
                             "/M:" + std::to_string(size.microbatches);
    for (const Placement& p : {kReference, kCandidate}) {
      for (const std::string kernels : {"torch", "harness"}) {
        const std::string mid = "/" + std::string(p.name) + "/" + kernels;
        benchmark::RegisterBenchmark(("BM_PipelineStep" + mid + tail).c_str(), BM_PipelineStep,
                                     p, kernels, dev, size)
            ->Iterations(dev == Dev::kCpu ? 20 : 5)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
    for (const Placement& p : {kReference, kCandidate}) {
      for (const std::string kernels : {"torch", "harness"}) {
        const std::string mid = "/" + std::string(p.name) + "/" + kernels;
        benchmark::RegisterBenchmark(("BM_TrainStep" + mid + tail).c_str(), BM_TrainStep, p,
                                     kernels, dev, size)
            ->ArgNames({"extra_steps"})
            ->Arg(3)
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The harness's determinism settings (deterministic algorithms, one intra-op thread, TF32 off,
  // CUBLAS_WORKSPACE_CONFIG) before the first tensor op, as every run_variant() applies them.
  try {
    mtp::engine::apply_determinism();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_benchmark: %s\n", e.what());
    return 2;
  }
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  mtp::bench::add_run_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
