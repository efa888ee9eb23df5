// File: harness/cli/train_step_benchmark.cc
//
// Training-step throughput and MFU of the two MTP placements, the two kernel sets, fp32 and
// bf16 and the two attention backends, with every pipeline rank as a thread of this process
// (in-process transport; on CUDA all ranks on GPU 0). Issue 8's configurations:
//
//   small  8 layers, H 1024, F 2816, 16 heads (MHA), V 32768, s 2048, b 1, M 8, D 1, untied
//          (16384 tokens per step); CUDA only
//   tiny   8 layers, H 64, F 256, 4 heads, V 256, s 32, b 2, M 8, D 2, untied (512 tokens per
//          step); CPU and CUDA (the only size on the CPU, so that the CPU run stays short)
//
// Benchmarks (names spell every axis; the device comes last, then "manual_time"):
//
//   BM_PipelineStep/<size>/<pipeline>/<dtype>/<attention>/<placement>/<kernels>/<dev>
//       One step's forward and backward passes: run_pipeline_step() over the M microbatches
//       through the variant's schedule, grads accumulated as the trainer does (fp32: into
//       .grad; bf16: each chunk's bf16 .grad added into fp32 main grads after every backward
//       call, LocalModel::accumulate_main_grads). The model, the microbatches and the transport
//       are built once per repetition, untimed (the initial weights once per size); one untimed
//       step warms up. Excludes the embedding-group grad sum, the optimizer and the record, i.e.
//       it is what differs between placements, kernel sets and attention backends.
//   BM_TrainStep/<size>/<pipeline>/<dtype>/<attention>/<placement>/<kernels>/<dev>/
//   record:<none|digest|full>/extra_steps:k
//       One optimizer step end to end through run_variant(): one run of 1 + k steps, timed from
//       the end of its step 1 (RunOptions::on_step) to the end of the run (RunResult.
//       wall_seconds: the record's commit, i.e. the writer thread's backlog, included), over k.
//       Setup (initial weights, chunks, record header, step-0 weights) and the warm-up step stay
//       out; what remains is the mean of k steady-state steps: forward and backward, the
//       embedding-group grad sum, Adam and the record: none (RunOptions::write_record = false:
//       no gathers, no file), digest (record = "digest": on a GPU every grad and weight digested
//       there, kernels::block_digests; on the CPU snapshots digested by the writer thread) or
//       full (every byte written to the HDF5 file under $TMPDIR, then deleted: ~2 GB per
//       small-model step). digest / none is the recording overhead issue 9 bounds (≤ 1.2).
//       One iteration (one run; a one-step run more for the record's size per step).
//   BM_TrainStep/<…>/record:none/accumulation:canonical
//       The same with accumulation = "canonical" (engine/canonical_grads.h): its cost against
//       the record:none row (Megatron's order).
//
// Axes:
//   pipeline   p1: P = 1, no pipelining; p1graphs: the same with cuda_graphs = true (every
//              microbatch one replayed CUDA graph, engine/microbatch_graph.h; CUDA, bf16 and
//              harness kernels only); p4v2: P = 4, V = 2, interleaved 1F1B; p4v2graphs: the
//              same with cuda_graphs = true (each chunk's forward and backward replayed per
//              in-flight slot, engine/chunk_graphs.h; CUDA, bf16, harness kernels)
//   dtype      fp32 | bf16 (Megatron --bf16: bf16 parameters and activations, fp32 main grads)
//   attention  unfused (the composite, softmax in fp32) | flash (LibTorch's flash kernel; bf16
//              on CUDA with LibTorch >= 2 only, registered for CUDA and bf16 only) | harness
//              (kernels::causal_attention, the harness's fixed-order kernel: registered for
//              CUDA, bf16 and the tiny model only: it is for short sequences)
//   placement  reference: MTP with the loss, "E|t*3|(t|)*5mL" (p4v2), "Et*8mL" (p1)
//              candidate: MTP in a standalone stage, "E|t*3|(t|)*4tm|L" (p4v2); at p1 also
//              "Et*8mL", co-located (Megatron's rule R8 puts the MTP stage last, v = V − 1, and
//              at P = 1 that is the loss's stage), so the p1 candidate rows time the candidate's
//              code with MTP beside the loss. One m per MTP depth (tiny: mm)
//   kernels    torch (LibTorch ops) | harness (kernels/ops.h), ModelConfig::kernels
// MTP_BENCH_DETERMINISTIC=0 runs every row with LibTorch's deterministic algorithms off (see
// bench_deterministic; the run context's deterministic_algorithms says which).
// Data: the default byte-level GPL-3 text (35 KB; 2048-token windows wrap around), or 64 KiB of
// pseudo-random bytes where that file is missing.
//
// Time: manual, seconds per step; host clock around the step with a device sync on both sides
// (kernels/testing/benchmark_util.h).
// Counters:
//   tokens_per_second   M·b·s / step time
//   model_TFLOPs        model FLOPs per step / step time / 10¹², the model FLOPs by Megatron's
//                       formula (harness/perf/model_flops.h: 6·T·(every GEMM weight a token
//                       meets, the output layer once per head and MTP depth) + 6·nh·hn·(N + D)·
//                       B·s² for the causal attention; the MTP depths' layers included)
//   MFU                 model_TFLOPs / the H200's dense peak: 989.4 TFLOP/s for bf16, 66.9
//                       TFLOP/s for fp32 (no tensor cores: TF32 is off). CUDA rows only, and only
//                       meaningful on an H200 (the peaks are in the run context)
//   parameters          (BM_PipelineStep) unique parameters, MTP included
//   aten_ops_per_microbatch, dispatched_ops_per_microbatch, autograd_nodes_per_microbatch
//                       (BM_PipelineStep) the host's work: ATen operators (nested ones too),
//                       the dispatched ones (called by no other operator) and autograd nodes of
//                       the untimed warm-up step, over M (kernels/testing/op_count.h; every
//                       thread; the same on every machine for the same code and device kind;
//                       p1graphs: its first microbatch eager, the second captured, the rest
//                       replayed; p4v2graphs: each chunk eager until its first backward, then
//                       a capture per slot: so not a later step's);
//                       MTP_BENCH_OP_HISTOGRAM=N prints that step's N most frequent
//                       dispatched operators and nodes (any other value than a whole number
//                       ≥ 0 stops the program with exit code 2 before any benchmark)
//   wall_s, first_step_end_s, record_MB_per_step  (BM_TrainStep) the run's wall time, the end
//                       of its step 1, and the record's growth per extra step
//   step_until_on_step_s, end_of_run_s  (BM_TrainStep) the manual time's two parts: per timed
//                       step, the steps up to the last one's on_step (the record's jobs queued,
//                       not waited for); once per run, its end after that (the writer thread's
//                       backlog drained and the commit: fsync, rename, directory sync)
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "candidate/candidate.h"
#include "harness/common/error.h"
#include "harness/common/temp_file.h"
#include "harness/common/utf8.h"
#include "harness/config/model_config.h"
#include "harness/data/microbatch.h"
#include "harness/data/token_source.h"
#include "harness/engine/chunk.h"
#include "harness/engine/determinism.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/stage_main_grads.h"
#include "harness/engine/trainer.h"
#include "harness/gpu/gpu.h"
#include "harness/perf/model_flops.h"
#include "harness/transport/transport.h"
#include "kernels/ops.h"
#include "kernels/testing/benchmark_util.h"
#include "kernels/testing/op_count.h"
#include "kernels/testing/trace_util.h"
#include "reference/reference.h"

namespace {

namespace fs = std::filesystem;
using mtp::bench::bench_device;
using mtp::bench::Dev;
using mtp::bench::dev_name;
using mtp::bench::DeviceTimer;

constexpr uint64_t kSeed = 1234;

/// Dense peak FLOP/s of one H200 (SXM) for MFU: bf16 tensor cores, and fp32 without tensor
/// cores (TF32 is off in the harness).
constexpr double kH200PeakBf16 = 989.4e12;
constexpr double kH200PeakFp32 = 66.9e12;

/// ModelSize: one of issue 8's model and step shapes (untied embeddings, MHA).
struct ModelSize {
  const char* name;
  int64_t layers, hidden, ffn, heads, vocab, seq, micro_batch, microbatches, mtp_depths;
};
constexpr ModelSize kSmall{"small", 8, 1024, 2816, 16, 32768, 2048, 1, 8, 1};
constexpr ModelSize kTiny{"tiny", 8, 64, 256, 4, 256, 32, 2, 8, 2};

/// Pipeline: the pipeline-parallel shape of a variant and whether it runs through CUDA graphs.
enum class Pipeline { kP1, kP1Graphs, kP4V2, kP4V2Graphs };
bool pipelined(Pipeline p) { return p == Pipeline::kP4V2 || p == Pipeline::kP4V2Graphs; }
bool graphed(Pipeline p) { return p == Pipeline::kP1Graphs || p == Pipeline::kP4V2Graphs; }

/// Placement: which implementation places MTP.
enum class Placement { kReference, kCandidate };

/// Setting: one benchmark's axes.
struct Setting {
  ModelSize size;
  Pipeline pipeline;
  mtp::config::DType dtype;
  mtp::config::AttentionBackend attention;
  Placement placement;
  mtp::config::Kernels kernels;
  Dev dev;
};

const char* pipeline_name(Pipeline p) {
  switch (p) {
    case Pipeline::kP1:
      return "p1";
    case Pipeline::kP1Graphs:
      return "p1graphs";
    case Pipeline::kP4V2:
      return "p4v2";
    case Pipeline::kP4V2Graphs:
      return "p4v2graphs";
  }
  return "?";
}
const char* placement_name(Placement p) {
  return p == Placement::kReference ? "reference" : "candidate";
}
const char* dtype_name(mtp::config::DType d) {
  return d == mtp::config::DType::kBFloat16 ? "bf16" : "fp32";
}

/// The layout of `placement` at `pipeline` for D = depths: see the file comment.
std::string layout_for(Placement placement, Pipeline pipeline, int64_t depths) {
  const std::string m(static_cast<size_t>(depths), 'm');
  if (!pipelined(pipeline)) return "Et*8" + m + "L";  // both placements (rule R8)
  return placement == Placement::kReference ? "E|t*3|(t|)*5" + m + "L" : "E|t*3|(t|)*4t" + m + "|L";
}

/// The benchmark name's axes: "<size>/<pipeline>/<dtype>/<attention>/<placement>/<kernels>/<dev>".
std::string setting_name(const Setting& s) {
  return std::string(s.size.name) + "/" + pipeline_name(s.pipeline) + "/" + dtype_name(s.dtype) +
         "/" + std::string(mtp::config::enum_name(s.attention)) + "/" +
         placement_name(s.placement) + "/" + std::string(mtp::config::enum_name(s.kernels)) + "/" +
         dev_name(s.dev);
}

std::unique_ptr<mtp::engine::Implementation> make_implementation(Placement p) {
  return p == Placement::kReference ? mtp::reference::make_reference()
                                    : mtp::candidate::make_candidate();
}

mtp::config::ModelConfig model_config(const Setting& s) {
  mtp::config::ModelConfig cfg;
  cfg.num_layers = s.size.layers;
  cfg.hidden_size = s.size.hidden;
  cfg.ffn_hidden_size = s.size.ffn;
  cfg.num_attention_heads = s.size.heads;
  cfg.num_query_groups = s.size.heads;
  cfg.vocab_size = s.size.vocab;
  cfg.seq_length = s.size.seq;
  cfg.micro_batch_size = s.size.micro_batch;
  cfg.mtp_num_layers = s.size.mtp_depths;
  cfg.untie_embeddings = true;
  cfg.kernels = s.kernels;
  cfg.attention_backend = s.attention;
  cfg.validate();
  return cfg;
}

mtp::config::VariantSpec variant_spec(const Setting& s) {
  mtp::config::VariantSpec v;
  v.name = std::string(placement_name(s.placement)) + "_" + pipeline_name(s.pipeline);
  v.implementation = s.placement == Placement::kReference ? mtp::config::Implementation::kReference
                                                          : mtp::config::Implementation::kCandidate;
  v.layout = layout_for(s.placement, s.pipeline, s.size.mtp_depths);
  v.pipeline_size = pipelined(s.pipeline) ? 4 : 1;
  v.cuda_graphs = graphed(s.pipeline);
  v.kernels = s.kernels;
  v.attention_backend = s.attention;
  return v;
}

mtp::config::TrainingConfig training_config(const Setting& s) {
  mtp::config::TrainingConfig t;
  t.num_microbatches = s.size.microbatches;
  t.seed = kSeed;
  t.dtype = s.dtype;
  t.device = mtp::config::parse_enum<mtp::config::Device>(dev_name(s.dev));
  return t;
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
  ~TempDir() { mtp::remove_tree(path_.string()); }  // not fs::remove_all (temp_file.h)
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

/// The initial weights of `size` (float64, on the CPU), made once per size and process: the
/// small model's 1.85·10⁸ values take seconds, and every repetition of every setting needs them.
const mtp::engine::InitialWeights& initial_weights(const mtp::config::ModelConfig& cfg,
                                                   const ModelSize& size) {
  static std::mutex mu;
  static std::map<std::string, mtp::engine::InitialWeights> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(size.name);
  if (it == cache.end()) {
    it = cache.emplace(size.name, mtp::engine::make_initial_weights(cfg, kSeed)).first;
  }
  return it->second;
}

/// Step 1's M microbatches on `device`, as the trainer builds them (loss mask in fp32, the
/// main-grad dtype of fp32 and bf16 runs).
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
    mtp::engine::MicrobatchTensors t;
    t.tokens = tokens.to(at::kLong).to(device);
    t.labels = labels.to(at::kLong).to(device);
    t.loss_mask = mask.to(at::kFloat).to(device);
    t.num_microbatches = M;
    mbs.push_back(std::move(t));
  }
  return mbs;
}

/// M·b·s: the tokens of one step.
int64_t tokens_per_step(const ModelSize& size) {
  return size.microbatches * size.micro_batch * size.seq;
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

/// The Chrome trace file of `name` ('/' → '_') under $MTP_BENCH_TRACE_DIR, or "" when that
/// variable is unset: benchmarks then record one more step (BM_PipelineStep) or run
/// (BM_TrainStep) under the Kineto profiler (kernels/testing/trace_util.h), outside the timing.
std::string trace_path(const std::string& name) {
  const char* dir = std::getenv("MTP_BENCH_TRACE_DIR");
  if (dir == nullptr || *dir == '\0') return "";
  std::string file = name;
  std::replace(file.begin(), file.end(), '/', '_');
  return (fs::path(dir) / (file + ".trace.json")).string();
}

/// $MTP_BENCH_OP_HISTOGRAM as a row count (0 when unset): BM_PipelineStep then prints that many
/// of the counted step's most frequent operators and nodes to stderr. Throws InputError naming
/// the variable and its value when it is set to anything but a whole number ≥ 0.
size_t op_histogram_rows() {
  const char* v = std::getenv("MTP_BENCH_OP_HISTOGRAM");
  if (v == nullptr) return 0;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || n < 0 || errno == ERANGE) {
    throw mtp::InputError(fmt::format(
        "MTP_BENCH_OP_HISTOGRAM=\"{}\": expected the number of rows to print, a whole number "
        ">= 0 (0: none)",
        mtp::printable_excerpt(v)));
  }
  return static_cast<size_t>(n);
}

/// MTP_BENCH_DETERMINISTIC: unset or "1", every row with the harness's determinism settings;
/// "0", the same rows with LibTorch's deterministic algorithms and cuDNN's deterministic mode
/// off (all else as set: one intra-op thread, TF32 off, the environment), for the
/// deterministic / non-deterministic step-time ratio (issue 25). The harness kernels are
/// deterministic by construction; what changes is LibTorch's ops (the torch rows' embedding
/// backward and cross entropy, the NaN fill on LibTorch < 2.1). Throws InputError for any other
/// value.
bool bench_deterministic() {
  const char* v = std::getenv("MTP_BENCH_DETERMINISTIC");
  if (v == nullptr || std::string(v) == "1") return true;
  if (std::string(v) == "0") return false;
  throw mtp::InputError(fmt::format(
      "MTP_BENCH_DETERMINISTIC=\"{}\": expected 1 (deterministic algorithms on, the default) or "
      "0 (off)",
      mtp::printable_excerpt(v)));
}

/// Sets tokens_per_second, model_TFLOPs and (CUDA) MFU from `seconds` over `steps` steps.
void set_throughput_counters(benchmark::State& state, const Setting& s,
                             const mtp::config::ModelConfig& cfg, double steps, double seconds) {
  const double tokens = static_cast<double>(tokens_per_step(s.size));
  const double flops =
      mtp::perf::model_flops_per_step(cfg, s.size.microbatches * s.size.micro_batch).total;
  state.counters["tokens_per_second"] = tokens * steps / seconds;
  const double flops_per_second = flops * steps / seconds;
  state.counters["model_TFLOPs"] = flops_per_second / 1e12;
  if (s.dev == Dev::kCuda) {
    const double peak = s.dtype == mtp::config::DType::kBFloat16 ? kH200PeakBf16 : kH200PeakFp32;
    state.counters["MFU"] = flops_per_second / peak;
  }
}

/// Sets aten_ops_per_microbatch, dispatched_ops_per_microbatch and autograd_nodes_per_microbatch
/// from `count` (one step) and prints its histogram when $MTP_BENCH_OP_HISTOGRAM asks.
void set_host_work_counters(benchmark::State& state, const Setting& setting,
                            const mtp::bench::OpCount& count) {
  const double m = static_cast<double>(setting.size.microbatches);
  state.counters["aten_ops_per_microbatch"] = static_cast<double>(count.operators()) / m;
  state.counters["dispatched_ops_per_microbatch"] = static_cast<double>(count.dispatched()) / m;
  state.counters["autograd_nodes_per_microbatch"] = static_cast<double>(count.nodes()) / m;
  if (const size_t rows = op_histogram_rows(); rows > 0) {
    std::fprintf(stderr,
                 "# BM_PipelineStep/%s: the %zu most frequent operators and nodes of one step "
                 "(%lld operators, %lld dispatched, %lld nodes)\n",
                 setting_name(setting).c_str(), rows, static_cast<long long>(count.operators()),
                 static_cast<long long>(count.dispatched()), static_cast<long long>(count.nodes()));
    count.print_top(stderr, rows);
  }
}

/// BM_PipelineStep: forward + backward of one step (run_pipeline_step), see the file comment.
void BM_PipelineStep(benchmark::State& state, Setting setting) {
  if (auto why = mtp::bench::device_unavailable(setting.dev)) {
    state.SkipWithError(why->c_str());
    return;
  }
  try {
    TempDir tmp;
    const at::Device device = bench_device(setting.dev);
    warm_device(device);
    const mtp::config::ModelConfig cfg = model_config(setting);
    auto impl = make_implementation(setting.placement);
    const mtp::engine::RunPlan plan =
        mtp::engine::plan_variant(cfg, training_config(setting), variant_spec(setting), *impl);
    const mtp::layout::PipelineLayout& layout = plan.layout;
    auto source = mtp::data::open_token_source(bench_data(tmp.path()));
    mtp::data::MicrobatchBuilder builder(*source, cfg.micro_batch_size, cfg.seq_length,
                                         cfg.vocab_size, /*mask_token=*/-1);
    const mtp::engine::InitialWeights& init = initial_weights(cfg, setting.size);
    const bool bf16 = setting.dtype == mtp::config::DType::kBFloat16;
    auto chunks = impl->build_chunks(layout, cfg, init, bf16 ? at::kBFloat16 : at::kFloat, device);
    const auto mbs = microbatches(builder, cfg, setting.size.microbatches, device);
    mtp::transport::InProcessOptions topt;
    topt.timeout = std::chrono::milliseconds(600000);
    auto transport = mtp::transport::make_in_process_transport(layout.pipeline_size, topt);
    std::unique_ptr<mtp::engine::StageMainGrads> main_grads;  // bf16 only
    mtp::engine::ExecutionOptions exec;
    if (bf16) {
      main_grads = std::make_unique<mtp::engine::StageMainGrads>(chunks);
      exec.after_backward = [&main_grads](int stage) { main_grads->accumulate(stage); };
    }
    std::unique_ptr<mtp::engine::MicrobatchGraph> graph;           // p1graphs only
    std::unique_ptr<mtp::engine::PipelineGraphs> pipeline_graphs;  // p4v2graphs only
    if (plan.variant.cuda_graphs && layout.num_stages() == 1) {
      graph = std::make_unique<mtp::engine::MicrobatchGraph>(device);
      exec.graph = graph.get();
    } else if (plan.variant.cuda_graphs) {
      pipeline_graphs = std::make_unique<mtp::engine::PipelineGraphs>(device, layout.num_stages());
      exec.pipeline_graphs = pipeline_graphs.get();
    }
    auto reset_grads = [&] {
      for (const auto& c : chunks) {
        for (const auto& entry : c->params().entries()) entry.second.mutable_grad().reset();
      }
      if (main_grads) main_grads->zero();
    };
    DeviceTimer timer(device);
    {  // the warm-up step, its host work counted (kernels/testing/op_count.h)
      mtp::bench::OpCount count(op_histogram_rows() > 0);
      mtp::engine::run_pipeline_step(chunks, layout, plan.schedule, mbs, *transport, exec);
      count.stop();
      set_host_work_counters(state, setting, count);
      reset_grads();
    }
    double seconds = 0.0;
    for (auto _ : state) {
      timer.Start();
      mtp::engine::run_pipeline_step(chunks, layout, plan.schedule, mbs, *transport, exec);
      const double t = timer.Stop();
      state.SetIterationTime(t);
      seconds += t;
      reset_grads();
    }
    set_throughput_counters(state, setting, cfg, static_cast<double>(state.iterations()), seconds);
    if (const std::string path = trace_path("BM_PipelineStep/" + setting_name(setting));
        !path.empty()) {
      mtp::bench::TraceRegion trace;
      trace.start();
      mtp::engine::run_pipeline_step(chunks, layout, plan.schedule, mbs, *transport, exec);
      trace.stop_and_save(at::zeros({1}, at::TensorOptions().device(device)), path);
      reset_grads();
    }
    state.counters["parameters"] = static_cast<double>(count_parameters(init));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  // The repetition's graphs are destroyed: their pools back to the device before the next
  // repetition builds its own (gpu::release_cached_memory says why LibTorch may not).
  if (graphed(setting.pipeline)) {
    try {
      mtp::gpu::release_cached_memory(0);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
    }
  }
}

/// BM_TrainStep: one optimizer step end to end, (wall(steps = 1 + k) − wall(steps = 1)) / k of
/// run_variant() with k = state.range(0), see the file comment.
/// What BM_TrainStep records.
enum class RecordChoice { kNone, kDigest, kFull };

const char* record_choice_name(RecordChoice r) {
  return r == RecordChoice::kNone ? "none" : r == RecordChoice::kDigest ? "digest" : "full";
}

void BM_TrainStep(benchmark::State& state, Setting setting, RecordChoice record,
                  mtp::config::Accumulation accumulation) {
  if (auto why = mtp::bench::device_unavailable(setting.dev)) {
    state.SkipWithError(why->c_str());
    return;
  }
  try {
    const int64_t extra_steps = state.range(0);
    TempDir tmp;
    warm_device(bench_device(setting.dev));
    const mtp::config::ModelConfig cfg = model_config(setting);
    mtp::config::VariantSpec variant = variant_spec(setting);
    variant.accumulation = accumulation;
    auto impl = make_implementation(setting.placement);
    const mtp::data::DataConfig data = bench_data(tmp.path());
    mtp::config::TrainingConfig training = training_config(setting);
    training.record = record == RecordChoice::kFull ? mtp::config::RecordMode::kFull
                                                    : mtp::config::RecordMode::kDigest;
    // One run of `steps` steps: its wall seconds (the record's commit included), the seconds at
    // the end of its first step (RunOptions::on_step) and its record size; record deleted.
    double last_step_end = 0;  // the latest run's end of its last step (on_step)
    auto run = [&](int64_t steps, double* wall, double* first_step_end, double* record_bytes) {
      training.steps = steps;
      mtp::engine::RunOptions options;
      options.write_record = record != RecordChoice::kNone;
      options.record_path = (tmp.path() / ("steps" + std::to_string(steps) + ".h5")).string();
      options.scenario_name = "train_step_benchmark";
      options.recv_timeout = std::chrono::milliseconds(600000);
      options.on_step = [first_step_end, &last_step_end](int64_t step, int64_t last,
                                                         double seconds) {
        if (step == 1) *first_step_end = seconds;
        if (step == last) last_step_end = seconds;
      };
      const mtp::engine::RunResult r = mtp::engine::run_variant(
          mtp::engine::plan_variant(cfg, training, variant, *impl), *impl, data, options);
      *wall = r.wall_seconds;
      *record_bytes =
          options.write_record ? static_cast<double>(fs::file_size(options.record_path)) : 0.0;
      if (options.write_record) fs::remove(options.record_path);
    };
    double wall = 0, first = 0, bytes = 0, seconds = 0, bytes_one = 0, unused = 0;
    double steps_only = 0;  // the timed steps up to their last on_step, without the commit
    for (auto _ : state) {
      run(1 + extra_steps, &wall, &first, &bytes);
      const double t = std::max((wall - first) / static_cast<double>(extra_steps), 1e-9);
      state.SetIterationTime(t);
      seconds += t;
      steps_only = (last_step_end - first) / static_cast<double>(extra_steps);
    }
    // What the manual time holds, apart: the steps as issued (the writer thread's backlog is
    // not waited for) and what the run's end adds (the backlog drained, the record's commit:
    // fsync, rename, directory sync), once per run whatever its length.
    const double commit = wall - last_step_end;
    // The record's growth per step: a one-step run's record against the long run's.
    if (record != RecordChoice::kNone) run(1, &unused, &unused, &bytes_one);
    set_throughput_counters(state, setting, cfg, static_cast<double>(state.iterations()), seconds);
    if (const std::string path = trace_path("BM_TrainStep/" + setting_name(setting) +
                                            "/record:" + record_choice_name(record));
        !path.empty()) {
      mtp::bench::TraceRegion trace;
      trace.start();
      run(2, &unused, &unused, &unused);
      trace.stop_and_save(at::zeros({1}, at::TensorOptions().device(bench_device(setting.dev))),
                          path);
    }
    state.counters["wall_s"] = wall;
    state.counters["first_step_end_s"] = first;
    state.counters["step_until_on_step_s"] = steps_only;
    state.counters["end_of_run_s"] = commit;
    state.counters["record_MB_per_step"] =
        (bytes - bytes_one) / static_cast<double>(extra_steps) / 1e6;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

/// Every setting of `dev`: tiny only on the CPU, small and tiny on CUDA; flash attention only
/// for bf16 on CUDA, the harness's attention only there and for the tiny model. Order: size,
/// pipeline, dtype, attention, placement, kernels (so that the pairs a ratio compares print next
/// to each other).
std::vector<Setting> settings_for(Dev dev) {
  using mtp::config::AttentionBackend;
  using mtp::config::DType;
  using mtp::config::Kernels;
  std::vector<Setting> out;
  const std::vector<ModelSize> sizes =
      dev == Dev::kCpu ? std::vector<ModelSize>{kTiny} : std::vector<ModelSize>{kSmall, kTiny};
  for (const ModelSize& size : sizes) {
    for (Pipeline pipeline :
         {Pipeline::kP1, Pipeline::kP1Graphs, Pipeline::kP4V2, Pipeline::kP4V2Graphs}) {
      if (graphed(pipeline) && dev != Dev::kCuda) continue;
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        if (graphed(pipeline) && dtype != DType::kBFloat16) continue;
        for (AttentionBackend attention :
             {AttentionBackend::kUnfused, AttentionBackend::kFlash, AttentionBackend::kHarness}) {
          if (attention != AttentionBackend::kUnfused &&
              (dtype != DType::kBFloat16 || dev != Dev::kCuda)) {
            continue;
          }
          // The harness's attention is for short sequences (kernels::causal_attention): tiny.
          if (attention == AttentionBackend::kHarness && size.seq > 256) continue;
          for (Placement placement : {Placement::kReference, Placement::kCandidate}) {
            for (Kernels kernels : {Kernels::kTorch, Kernels::kHarness}) {
              if (graphed(pipeline) && kernels != Kernels::kHarness) continue;
              out.push_back({size, pipeline, dtype, attention, placement, kernels, dev});
            }
          }
        }
      }
    }
  }
  return out;
}

/// Timed steps per repetition of BM_PipelineStep: the small model takes ~0.2–0.8 s a step on an
/// H200, the tiny one is launch-bound (tens of ms); the CPU runs only the tiny one.
int64_t pipeline_iterations(const Setting& s) {
  if (s.dev == Dev::kCpu) return 10;
  return std::string(s.size.name) == "small" ? 3 : 10;
}

void register_benchmarks() {
  for (Dev dev : {Dev::kCpu, Dev::kCuda}) {
    for (const Setting& s : settings_for(dev)) {
      benchmark::RegisterBenchmark(("BM_PipelineStep/" + setting_name(s)).c_str(), BM_PipelineStep,
                                   s)
          ->Iterations(pipeline_iterations(s))
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
    for (const Setting& s : settings_for(dev)) {
      for (RecordChoice r : {RecordChoice::kNone, RecordChoice::kDigest, RecordChoice::kFull}) {
        benchmark::RegisterBenchmark(
            ("BM_TrainStep/" + setting_name(s) + "/record:" + record_choice_name(r)).c_str(),
            BM_TrainStep, s, r, mtp::config::Accumulation::kMegatron)
            ->ArgNames({"extra_steps"})
            ->Arg(4)
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
      // Canonical accumulation's cost (engine/canonical_grads.h) beside the row above it with
      // Megatron's order (record none); not with CUDA graphs, which refuse it.
      if (graphed(s.pipeline)) continue;
      benchmark::RegisterBenchmark(
          ("BM_TrainStep/" + setting_name(s) + "/record:none/accumulation:canonical").c_str(),
          BM_TrainStep, s, RecordChoice::kNone, mtp::config::Accumulation::kCanonical)
          ->ArgNames({"extra_steps"})
          ->Arg(4)
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The harness's determinism settings (deterministic algorithms, one intra-op thread, TF32 off,
  // CUBLAS_WORKSPACE_CONFIG) before the first tensor op, as every run_variant() applies them.
  try {
    mtp::engine::apply_determinism();
    if (!bench_deterministic()) {  // a malformed value stops the run before any benchmark
      at::globalContext().setDeterministicAlgorithms(false, /*warn_only=*/false);
      at::globalContext().setDeterministicCuDNN(false);
    }
    op_histogram_rows();  // likewise
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_benchmark: %s\n", e.what());
    return 2;
  }
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  mtp::bench::add_run_context();
  benchmark::AddCustomContext("deterministic_algorithms",
                              at::globalContext().deterministicAlgorithms() ? "on" : "off");
  benchmark::AddCustomContext("mfu_peak_bf16_TFLOPs", "989.4 (H200 SXM, dense bf16)");
  benchmark::AddCustomContext("mfu_peak_fp32_TFLOPs", "66.9 (H200 SXM, fp32 without tensor cores)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
