// File: kernels/kernels_benchmark.cc
//
// Throughput of the deterministic kernels of kernels/ops.h against the LibTorch ops they replace,
// on the CPU (small sizes, one intra-op thread, as the harness runs) and on CUDA (training sizes;
// skipped with "no CUDA device" when there is none). Benchmark names:
//
//   BM_CopyBandwidth/<dev>/bytes:B                            dst.copy_(src) of B bytes
//   BM_EmbeddingBackward/<variant>/<dev>/<dtype>/T:_/H:_/V:_  grad_table [V, H] from grad_out [T,H]
//   BM_RmsNorm/<variant>/<dev>/<dtype>/N:_/H:_                forward + backward of [N, H]
//   BM_CrossEntropy/<variant>/<dev>/<dtype>/N:_/V:_           forward + backward of [N, V] logits
//   BM_Swiglu/<variant>/<dev>/<dtype>/N:_/F:_                 forward + backward of silu(gate)·up,
//                                                             gate_up [N, 2F] (CUDA only: on the
//                                                             CPU the harness op is the composite)
//   BM_Attention/<backend>/<dev>/<dtype>/b:_/heads:_/s:_/hn:_ forward + backward of causal
//                                                             attention, q, k, v [b, heads, s, hn]
//   BM_BlockSummaries/<dev>/bytes:B                           kernels::block_summaries of B bytes
//                                                             of float32 in blocks of 65536
//                                                             elements (what a digest-only record
//                                                             runs per tensor; the small model's
//                                                             layernorm weight, attention
//                                                             projection and embedding)
//   BM_BlockSummariesList/<dev>/<each|batched>/tensors:N/bytes:B
//                                                             the same of N tensors of B bytes:
//                                                             one call per tensor, or one call
//                                                             on the list (the step recorder's)
//
// Variants:
//   harness              mtp::kernels autograd ops (fixed reduction orders, no atomics)
//   torch_deterministic  the LibTorch formulation with deterministic algorithms on
//   torch_default        the same LibTorch ops with deterministic algorithms off
//
// Attention backends (the model's attention_backend; deterministic algorithms on for all):
//   unfused  the model's composite (harness/model/layers.cc): q·kᵀ in the input dtype, scaled,
//            masked (−10000 above the diagonal) and softmaxed in fp32, cast back, times v
//   flash    mtp::kernels::flash_causal_attention (LibTorch's flash kernel; bf16 on CUDA with
//            LibTorch >= 2 only, skipped with the reason elsewhere)
//   harness  mtp::kernels::causal_attention (the harness's fixed-order kernel, no tensor cores,
//            an [s, s] scratch per sample and head): registered for sequences up to 256 only
//
// The LibTorch formulations: embedding = index_select (the model's "torch" path; its backward is
// index_add_ into zeros); RMSNorm = x · rsqrt(mean(x²) + eps) · w (the model's op); cross entropy =
// log_softmax (fp32) + gather of the label, negated (LibTorch's fused softmax; the model's "torch"
// path instead spells out max / exp / sum / log, see RESULTS.md); SwiGLU = at::silu(gate) * up
// of gate_up.chunk(2, -1) (the model's "torch" path; the harness op is bitwise the same).
//
// Time (manual, per op = one forward + backward, or one backward, or one copy): each iteration
// runs `reps` ops (10 on CUDA, 1 on the CPU) between two device syncs
// (testing/benchmark_util.h) and reports the elapsed host time divided by reps. One untimed op
// warms up first. Embedding backward reruns the backward of one retained graph (the table's grad
// is reset before each), so its forward is not timed; RMSNorm, cross entropy and attention build
// a fresh graph each op.
//
// Counters:
//   bytes_per_second   algorithmic bytes per op / time per op (SetBytesProcessed)
//   achieved_GBps      the same, in 10^9 B/s
//   copy_bw_fraction   achieved_GBps / this device's copy bandwidth (read + write bytes of
//                      BM_CopyBandwidth's copy, measured once per process)
//   TFLOPs             (BM_Attention) 6·b·heads·hn·s² per forward + backward / time / 10¹²: the
//                      causal attention term of Megatron's model FLOPs (harness/perf/model_flops.h;
//                      q·kᵀ and p·v, half the scores masked, forward + 2 for the backward)
// Algorithmic bytes (e = element size): embedding backward T·H·e + 8T (read grad_out, ids) +
// V·H·e (write the table's grad); RMSNorm 5·N·H·e (forward reads x, writes y; backward reads dy
// and x, writes dx; w, rstd and dw are negligible); cross entropy 3·N·V·e (forward reads the
// logits, backward reads them again and writes their grad); SwiGLU 8·N·F·e (forward reads
// gate_up, writes y; backward reads dy and gate_up, writes d_gate_up). A copy of B bytes moves 2B.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/testing/benchmark_util.h"

namespace {

using mtp::bench::bench_device;
using mtp::bench::Dev;
using mtp::bench::dev_name;
using mtp::bench::DeviceTimer;

/// Variant: which implementation of a kernel runs.
enum class Variant { kHarness, kTorchDeterministic, kTorchDefault };

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kHarness:
      return "harness";
    case Variant::kTorchDeterministic:
      return "torch_deterministic";
    case Variant::kTorchDefault:
      return "torch_default";
  }
  return "?";
}

const char* dtype_name(at::ScalarType t) { return t == at::kBFloat16 ? "bf16" : "fp32"; }

/// Ops per timed iteration: amortises the sync (a few µs) over several CUDA launches.
int reps_for(Dev d) { return d == Dev::kCuda ? 10 : 1; }

/// Bytes of BM_CopyBandwidth's buffer: 1 GiB on CUDA, 256 MiB on the CPU.
int64_t copy_bytes_for(Dev d) {
  return d == Dev::kCuda ? (int64_t{1} << 30) : (int64_t{256} << 20);
}

/// DeterministicScope: at::globalContext()'s deterministic-algorithms switch for its lifetime
/// (error mode, not warn), restored afterwards.
class DeterministicScope {
 public:
  explicit DeterministicScope(bool on)
      : prev_(at::globalContext().deterministicAlgorithms()),
        prev_warn_only_(at::globalContext().deterministicAlgorithmsWarnOnly()) {
    at::globalContext().setDeterministicAlgorithms(on, /*warn_only=*/false);
  }
  ~DeterministicScope() { at::globalContext().setDeterministicAlgorithms(prev_, prev_warn_only_); }
  DeterministicScope(const DeterministicScope&) = delete;
  DeterministicScope& operator=(const DeterministicScope&) = delete;

 private:
  bool prev_;
  bool prev_warn_only_;
};

/// Why (variant, device) cannot run here, or nullopt.
std::optional<std::string> unavailable(Variant v, Dev d) {
  if (auto why = mtp::bench::device_unavailable(d)) return why;
  if (d == Dev::kCuda && v == Variant::kHarness && !mtp::kernels::cuda_kernels_built()) {
    return std::string("mtp_kernels was built without CUDA kernels");
  }
  return std::nullopt;
}

/// Seconds per copy of `bytes` bytes on `device`: mean over `groups` timed groups of `reps`
/// copies after one warm-up copy.
double copy_seconds(const at::Device& device, int64_t bytes, int reps, int groups) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor src = at::ones({bytes / 4}, opts);
  at::Tensor dst = at::empty_like(src);
  DeviceTimer timer(device);
  dst.copy_(src);
  double total = 0.0;
  for (int g = 0; g < groups; ++g) {
    timer.Start();
    for (int i = 0; i < reps; ++i) dst.copy_(src);
    total += timer.Stop();
  }
  return total / (static_cast<double>(groups) * reps);
}

/// Copy bandwidth of `d` in 10^9 B/s (read + write bytes), measured once per process with the
/// same copy as BM_CopyBandwidth (5 groups of reps_for(d) copies).
double reference_copy_GBps(Dev d) {
  static std::map<Dev, double> cache;
  auto it = cache.find(d);
  if (it != cache.end()) return it->second;
  const int64_t bytes = copy_bytes_for(d);
  const double gbps =
      2.0 * static_cast<double>(bytes) / copy_seconds(bench_device(d), bytes, reps_for(d), 5) / 1e9;
  cache.emplace(d, gbps);
  return gbps;
}

/// timed_loop: one untimed op, then per iteration reps_for(dev) calls of `op` between two
/// syncs; iteration time = elapsed / reps. Returns the sum of the iteration times (seconds).
template <typename Op>
double timed_loop(benchmark::State& state, Dev dev, Op&& op) {
  DeviceTimer timer(bench_device(dev));
  const int reps = reps_for(dev);
  op();
  timer.Sync();
  double seconds = 0.0;
  for (auto _ : state) {
    timer.Start();
    for (int i = 0; i < reps; ++i) op();
    const double t = timer.Stop() / reps;
    state.SetIterationTime(t);
    seconds += t;
  }
  return seconds;
}

/// time_op: timed_loop, then bytes processed, achieved_GBps and (unless this is the copy
/// itself) copy_bw_fraction from `bytes_per_op`.
template <typename Op>
void time_op(benchmark::State& state, Dev dev, double bytes_per_op, bool with_fraction, Op&& op) {
  const double seconds = timed_loop(state, dev, op);
  const double bytes = bytes_per_op * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  const double gbps = bytes / seconds / 1e9;
  state.counters["achieved_GBps"] = gbps;
  if (with_fraction) state.counters["copy_bw_fraction"] = gbps / reference_copy_GBps(dev);
}

at::TensorOptions options_for(Dev dev, at::ScalarType dtype) {
  return at::TensorOptions().dtype(dtype).device(bench_device(dev));
}

/// The model's "torch" RMSNorm (harness/model/layers.cc rms_norm).
at::Tensor torch_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  auto variance = (x * x).mean(-1, /*keepdim=*/true);
  return x * at::rsqrt(variance + eps) * w;
}

/// Cross entropy with LibTorch's fused log_softmax, in fp32 as Megatron's fp32 cross entropy:
/// logits [s, b, V], labels [b, s] → [b, s].
at::Tensor torch_cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
  auto logp = at::log_softmax(logits, -1, at::kFloat);
  return logp.gather(-1, labels.t().unsqueeze(-1)).squeeze(-1).neg().t();
}

/// Runs one case of a variant: skipped with the reason when the variant cannot run on `dev`;
/// `body` runs with deterministic algorithms as the variant says; an exception skips the case
/// with its message.
template <typename Body>
void run_case(benchmark::State& state, Variant v, Dev dev, Body&& body) {
  if (auto why = unavailable(v, dev)) {
    state.SkipWithError(why->c_str());
    return;
  }
  try {
    DeterministicScope det(v != Variant::kTorchDefault);
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

/// Runs one case that is not a kernel variant: skipped with the reason when `dev` cannot run;
/// `body` runs with deterministic algorithms on; an exception skips the case with its message.
template <typename Body>
void run_device_case(benchmark::State& state, Dev dev, Body&& body) {
  if (auto why = mtp::bench::device_unavailable(dev)) {
    state.SkipWithError(why->c_str());
    return;
  }
  try {
    DeterministicScope det(true);
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

/// BM_CopyBandwidth: dst.copy_(src) of `bytes` bytes (float32 buffers) on the device. Time per
/// copy; achieved_GBps counts the bytes read plus the bytes written (2 × bytes).
void BM_CopyBandwidth(benchmark::State& state, Dev dev) {
  run_device_case(state, dev, [&] {
    const int64_t bytes = state.range(0);
    const auto opts = options_for(dev, at::kFloat);
    at::Tensor src = at::ones({bytes / 4}, opts);
    at::Tensor dst = at::empty_like(src);
    time_op(state, dev, 2.0 * static_cast<double>(bytes), /*with_fraction=*/false,
            [&] { dst.copy_(src); });
  });
}

/// BM_BlockSummaries: kernels::block_summaries of `bytes` bytes of float32 (blocks of 65536
/// elements, record::kDigestBlockElements) on the device: its digests and non-finite counts.
/// Time per call; achieved_GBps counts the bytes read once. Small tensors measure the kernels'
/// latency, which a record pays once per tensor.
void BM_BlockSummaries(benchmark::State& state, Dev dev) {
  run_device_case(state, dev, [&] {
    const int64_t bytes = state.range(0);
    at::Tensor t = at::randn({bytes / 4}, options_for(dev, at::kFloat));
    time_op(state, dev, static_cast<double>(bytes), /*with_fraction=*/true,
            [&] { (void)mtp::kernels::block_summaries(t, 65536); });
  });
}

/// BM_BlockSummariesList: kernels::block_summaries of `tensors` float32 tensors of `bytes` bytes
/// each, as one list (`batched`: two launches per 64 tensors) or one call per tensor (`each`:
/// what the step recorder did before it passed a group's tensors together). Time per list.
void BM_BlockSummariesList(benchmark::State& state, Dev dev, bool batched) {
  run_device_case(state, dev, [&] {
    const int64_t count = state.range(0), bytes = state.range(1);
    std::vector<at::Tensor> ts;
    for (int64_t i = 0; i < count; ++i)
      ts.push_back(at::randn({bytes / 4}, options_for(dev, at::kFloat)));
    time_op(state, dev, static_cast<double>(count * bytes), /*with_fraction=*/true, [&] {
      if (batched) {
        (void)mtp::kernels::block_summaries(ts, 65536);
      } else {
        for (const at::Tensor& t : ts) (void)mtp::kernels::block_summaries(t, 65536);
      }
    });
  });
}

/// BM_EmbeddingBackward: the word-embedding backward, grad_table [V, H] from grad_out [T, H] and
/// ids [T] drawn uniformly from [0, V). Time per backward (forward not timed).
void BM_EmbeddingBackward(benchmark::State& state, Variant v, Dev dev, at::ScalarType dtype) {
  run_case(state, v, dev, [&] {
    const int64_t T = state.range(0), H = state.range(1), V = state.range(2);
    const auto opts = options_for(dev, dtype);
    at::Tensor ids = at::randint(V, {1, T}, opts.dtype(at::kLong));  // [b = 1, s = T]
    at::Tensor table = at::randn({V, H}, opts).requires_grad_(true);
    at::Tensor out = v == Variant::kHarness ? mtp::kernels::embedding_lookup(ids, table)  // [T,1,H]
                                            : at::index_select(table, 0, ids.reshape({-1}));
    at::Tensor grad_out = at::randn(out.sizes(), opts);
    const double e = static_cast<double>(c10::elementSize(dtype));
    const double bytes = static_cast<double>(T * H) * e + 8.0 * static_cast<double>(T) +
                         static_cast<double>(V * H) * e;
    time_op(state, dev, bytes, /*with_fraction=*/true, [&] {
      table.mutable_grad().reset();
      out.backward(grad_out, /*retain_graph=*/true);
    });
  });
}

/// BM_RmsNorm: forward and backward (dx and dw) of RMSNorm over x [N, H] with eps 1e-5. Time per
/// forward + backward.
void BM_RmsNorm(benchmark::State& state, Variant v, Dev dev, at::ScalarType dtype) {
  run_case(state, v, dev, [&] {
    const int64_t N = state.range(0), H = state.range(1);
    constexpr double kEps = 1e-5;
    const auto opts = options_for(dev, dtype);
    at::Tensor x = at::randn({N, H}, opts).requires_grad_(true);
    at::Tensor w = (1 + 0.1 * at::randn({H}, opts)).detach().requires_grad_(true);
    at::Tensor dy = at::randn({N, H}, opts);
    const double e = static_cast<double>(c10::elementSize(dtype));
    const double bytes = 5.0 * static_cast<double>(N * H) * e;
    time_op(state, dev, bytes, /*with_fraction=*/true, [&] {
      x.mutable_grad().reset();
      w.mutable_grad().reset();
      at::Tensor y =
          v == Variant::kHarness ? mtp::kernels::rms_norm(x, w, kEps) : torch_rms_norm(x, w, kEps);
      y.backward(dy);
    });
  });
}

/// BM_CrossEntropy: forward and backward of the per-token cross entropy of logits [N, V] (laid
/// out [s = N, b = 1, V]) against labels drawn uniformly from [0, V), loss in fp32. Time per
/// forward + backward.
void BM_CrossEntropy(benchmark::State& state, Variant v, Dev dev, at::ScalarType dtype) {
  run_case(state, v, dev, [&] {
    const int64_t N = state.range(0), V = state.range(1);
    const auto opts = options_for(dev, dtype);
    at::Tensor logits = (2 * at::randn({N, 1, V}, opts)).detach().requires_grad_(true);
    at::Tensor labels = at::randint(V, {1, N}, opts.dtype(at::kLong));
    at::Tensor grad_loss = at::randn({1, N}, opts.dtype(at::kFloat));
    const double e = static_cast<double>(c10::elementSize(dtype));
    const double bytes = 3.0 * static_cast<double>(N * V) * e;
    time_op(state, dev, bytes, /*with_fraction=*/true, [&] {
      logits.mutable_grad().reset();
      at::Tensor ce = v == Variant::kHarness ? mtp::kernels::cross_entropy(logits, labels)
                                             : torch_cross_entropy(logits, labels);
      ce.backward(grad_loss);
    });
  });
}

/// BM_Swiglu: forward and backward of the SwiGLU activation of gate_up [N, 2F] (kernels::swiglu
/// or LibTorch's composite). Time per forward + backward.
void BM_Swiglu(benchmark::State& state, Variant v, Dev dev, at::ScalarType dtype) {
  run_case(state, v, dev, [&] {
    const int64_t N = state.range(0), F = state.range(1);
    const auto opts = options_for(dev, dtype);
    at::Tensor gate_up = (2 * at::randn({N, 2 * F}, opts)).detach().requires_grad_(true);
    at::Tensor dy = at::randn({N, F}, opts);
    const double e = static_cast<double>(c10::elementSize(dtype));
    const double bytes = 8.0 * static_cast<double>(N * F) * e;
    time_op(state, dev, bytes, /*with_fraction=*/true, [&] {
      gate_up.mutable_grad().reset();
      at::Tensor y;
      if (v == Variant::kHarness) {
        y = mtp::kernels::swiglu(gate_up);
      } else {
        const auto halves = gate_up.chunk(2, -1);
        y = at::silu(halves[0]) * halves[1];
      }
      y.backward(dy);
    });
  });
}

/// AttentionBackend: which causal attention BM_Attention times.
enum class AttentionBackend { kUnfused, kFlash, kHarness };

const char* attention_name(AttentionBackend a) {
  switch (a) {
    case AttentionBackend::kFlash:
      return "flash";
    case AttentionBackend::kHarness:
      return "harness";
    case AttentionBackend::kUnfused:
      break;
  }
  return "unfused";
}

/// The longest sequence the harness attention rows are registered for (O(s²) work without
/// tensor cores: it is meant for short sequences).
constexpr int64_t kHarnessAttentionMaxSeq = 256;

/// The model's unfused causal attention (harness/model/layers.cc self_attention after the
/// projections): q, k, v [b, heads, s, hn] → [b, heads, s, hn].
at::Tensor unfused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    double scale) {
  const int64_t s = q.size(2);
  auto scores = at::matmul(q, k.transpose(-2, -1)).to(at::kFloat) * scale;
  auto future = at::ones({s, s}, q.options().dtype(at::kBool)).triu(1);
  auto probs = at::softmax(scores.masked_fill(future, -10000.0), -1).to(q.scalar_type());
  return at::matmul(probs, v);
}

/// BM_Attention: forward and backward (dq, dk, dv) of causal attention over q, k, v [b, heads,
/// s, hn] with scale 1/sqrt(hn), deterministic algorithms on. Time per forward + backward.
void BM_Attention(benchmark::State& state, AttentionBackend backend, Dev dev,
                  at::ScalarType dtype) {
  if (backend == AttentionBackend::kFlash &&
      (dev != Dev::kCuda || dtype != at::kBFloat16 || !mtp::kernels::flash_attention_available())) {
    state.SkipWithError("flash attention needs bf16 on CUDA and a CUDA LibTorch >= 2");
    return;
  }
  run_device_case(state, dev, [&] {
    const int64_t b = state.range(0), heads = state.range(1), s = state.range(2),
                  hn = state.range(3);
    const auto opts = options_for(dev, dtype);
    at::Tensor q = at::randn({b, heads, s, hn}, opts).requires_grad_(true);
    at::Tensor k = at::randn({b, heads, s, hn}, opts).requires_grad_(true);
    at::Tensor v = at::randn({b, heads, s, hn}, opts).requires_grad_(true);
    at::Tensor dout = at::randn({b, heads, s, hn}, opts);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hn));
    const double seconds = timed_loop(state, dev, [&] {
      for (at::Tensor* t : {&q, &k, &v}) t->mutable_grad().reset();
      at::Tensor out =
          backend == AttentionBackend::kFlash ? mtp::kernels::flash_causal_attention(q, k, v, scale)
          : backend == AttentionBackend::kHarness ? mtp::kernels::causal_attention(q, k, v, scale)
                                                  : unfused_causal_attention(q, k, v, scale);
      out.backward(dout);
    });
    const double flops = 6.0 * static_cast<double>(b * heads * hn) * static_cast<double>(s * s);
    state.counters["TFLOPs"] = flops * static_cast<double>(state.iterations()) / seconds / 1e12;
  });
}

/// Sizes: small on the CPU (the whole CPU run takes well under a minute), training sizes on CUDA
/// (T = N = 8192 tokens; H = 4096; V = 32768 and Llama-3's 128256; attention of the small
/// model of issue 8: 16 heads of 64, s = 2048, one sample and 8; and of the tiny model: b 2,
/// 4 heads of 16, s 32, on both devices).
struct Sizes {
  std::vector<std::vector<int64_t>> embedding;      ///< {T, H, V}
  std::vector<std::vector<int64_t>> rms_norm;       ///< {N, H}
  std::vector<std::vector<int64_t>> cross_entropy;  ///< {N, V}
  std::vector<std::vector<int64_t>> attention;      ///< {b, heads, s, hn}
  std::vector<std::vector<int64_t>> swiglu;         ///< {N, F}
  std::vector<at::ScalarType> dtypes;
};

Sizes sizes_for(Dev d) {
  if (d == Dev::kCpu) {
    return {
        {{2048, 256, 8192}}, {{2048, 1024}}, {{1024, 8192}}, {{1, 4, 256, 64}, {2, 4, 32, 16}}, {},
        {at::kFloat}};
  }
  return {{{8192, 4096, 32768}, {8192, 4096, 128256}},
          {{8192, 1024}, {8192, 4096}},
          {{8192, 32768}, {8192, 128256}},
          // issue 8's small model: one sample, and M = 8; the tiny model (b 2, s 32)
          {{1, 16, 2048, 64}, {8, 16, 2048, 64}, {2, 4, 32, 16}},
          {{2048, 2816}, {8192, 2816}},  // the small model's MLP: one sample, four
          {at::kFloat, at::kBFloat16}};
}

/// Registers one benchmark per (kernel, size, dtype, variant), in that nesting, so that the three
/// variants of one case print next to each other.
void register_benchmarks() {
  const Variant variants[] = {Variant::kHarness, Variant::kTorchDeterministic,
                              Variant::kTorchDefault};
  using Fn = void (*)(benchmark::State&, Variant, Dev, at::ScalarType);
  struct Kernel {
    const char* name;
    Fn fn;
    std::vector<std::string> arg_names;
    std::vector<std::vector<int64_t>> Sizes::*sizes;
  };
  const Kernel kernels[] = {
      {"BM_EmbeddingBackward", BM_EmbeddingBackward, {"T", "H", "V"}, &Sizes::embedding},
      {"BM_RmsNorm", BM_RmsNorm, {"N", "H"}, &Sizes::rms_norm},
      {"BM_CrossEntropy", BM_CrossEntropy, {"N", "V"}, &Sizes::cross_entropy},
      {"BM_Swiglu", BM_Swiglu, {"N", "F"}, &Sizes::swiglu}};
  for (Dev dev : {Dev::kCpu, Dev::kCuda}) {
    const std::string d = dev_name(dev);
    benchmark::RegisterBenchmark(("BM_CopyBandwidth/" + d).c_str(), BM_CopyBandwidth, dev)
        ->ArgNames({"bytes"})
        ->Arg(copy_bytes_for(dev))
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    for (int64_t bytes : {int64_t{4096}, int64_t{12} << 20, int64_t{128} << 20}) {
      benchmark::RegisterBenchmark(("BM_BlockSummaries/" + d).c_str(), BM_BlockSummaries, dev)
          ->ArgNames({"bytes"})
          ->Arg(bytes)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
    for (const bool batched : {false, true}) {
      for (int64_t bytes : {int64_t{4096}, int64_t{1} << 20}) {
        benchmark::RegisterBenchmark(
            ("BM_BlockSummariesList/" + d + (batched ? "/batched" : "/each")).c_str(),
            BM_BlockSummariesList, dev, batched)
            ->ArgNames({"tensors", "bytes"})
            ->Args({128, bytes})
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
    const Sizes sizes = sizes_for(dev);
    for (const Kernel& k : kernels) {
      for (const auto& args : sizes.*(k.sizes)) {
        for (at::ScalarType dtype : sizes.dtypes) {
          for (Variant v : variants) {
            const std::string name =
                std::string(k.name) + "/" + variant_name(v) + "/" + d + "/" + dtype_name(dtype);
            benchmark::RegisterBenchmark(name.c_str(), k.fn, v, dev, dtype)
                ->ArgNames(k.arg_names)
                ->Args(args)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
    for (const auto& args : sizes.attention) {
      for (at::ScalarType dtype : sizes.dtypes) {
        for (AttentionBackend a :
             {AttentionBackend::kUnfused, AttentionBackend::kFlash, AttentionBackend::kHarness}) {
          if (a == AttentionBackend::kFlash && (dev != Dev::kCuda || dtype != at::kBFloat16)) {
            continue;  // flash exists for bf16 on CUDA only
          }
          if (a == AttentionBackend::kHarness && args[2] > kHarnessAttentionMaxSeq) continue;
          const std::string name =
              std::string("BM_Attention/") + attention_name(a) + "/" + d + "/" + dtype_name(dtype);
          benchmark::RegisterBenchmark(name.c_str(), BM_Attention, a, dev, dtype)
              ->ArgNames({"b", "heads", "s", "hn"})
              ->Args(args)
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // One intra-op thread, as the harness trains (harness/engine/determinism.h): CPU rows compare
  // single-threaded LibTorch with the single-threaded CPU kernels.
  at::set_num_threads(1);
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  mtp::bench::add_run_context();
  benchmark::AddCustomContext("mtp_cuda_kernels_built",
                              mtp::kernels::cuda_kernels_built() ? "true" : "false");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
