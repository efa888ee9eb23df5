// File: harness/record/record_benchmark.cc
//
// What recording costs off the critical path: the digest's throughput, and the record writer's
// throughput to the disk under $TMPDIR (default /tmp), for one step of issue 8's "small" model
// (185M parameters: a step's fp32 main grads and weights, ~1.5 GB).
//
//   BM_DigestBytes/threads:t      digest_bytes() of 256 MiB of float32 on t threads (the step
//                                 recorder's writer thread uses min(8, cores / 2)); counter
//                                 GBps = bytes / time
//   BM_RecordWrite/<full|digest>  RecordWriter: one step of the small model's tensors (its
//                                 parameter shapes, fp32, twice: grad and weight) written with
//                                 digests computed by the writer, then commit() (flush, fsync,
//                                 rename, directory sync); counters GBps = tensor bytes / time
//                                 (what the writer thread sustains), file_MB
//   BM_RecordWriteManyTensors/tensors:n  RecordWriter: one group of n tensors of 16 floats each
//                                 (an MoE model's expert weights: 1,024 experts per layer make
//                                 16,000 per group), then commit(); counter seconds_per_tensor. A
//                                 group past 256 tensors keeps its links in dense storage (h5.cc):
//                                 in compact storage writing n links costs about n^3.
//
// Time: real time (the writer is one thread; digests may use more). The file system is printed
// in the context (`df` of $TMPDIR's device).
#include <benchmark/benchmark.h>
#include <sys/statvfs.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/record/digest.h"
#include "harness/record/record.h"
#include "harness/record/testing/small_step_record.h"

namespace {

namespace fs = std::filesystem;
using mtp::record::Storage;
using mtp::record::testing::bench_tmp_dir;
using mtp::record::testing::write_small_model_step;

void BM_DigestBytes(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> data(size_t{64} << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 1000) * 0.001f;
  const size_t bytes = data.size() * sizeof(float);
  for (auto _ : state) {
    benchmark::DoNotOptimize(mtp::record::digest_bytes(data.data(), bytes, 4, threads));
  }
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(bytes) * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

void BM_RecordWrite(benchmark::State& state, Storage storage) {
  const std::string path = bench_tmp_dir() + "/mtp_record_benchmark.h5";
  double file_bytes = 0, tensor_bytes = 0;
  for (auto _ : state) {
    tensor_bytes = static_cast<double>(write_small_model_step(path, storage));
    state.PauseTiming();
    file_bytes = static_cast<double>(fs::file_size(path));
    fs::remove(path);
    state.ResumeTiming();
  }
  state.counters["GBps"] =
      benchmark::Counter(tensor_bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["file_MB"] = file_bytes / 1e6;
}

void BM_RecordWriteManyTensors(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string path = bench_tmp_dir() + "/mtp_record_benchmark_many.h5";
  const std::vector<float> values(16, 0.5f);
  for (auto _ : state) {
    {
      mtp::record::RecordWriter w(path);
      for (int64_t i = 0; i < n; ++i) {
        w.write(1, "grad",
                mtp::record::TensorData::from_f32("decoder.layers.0.mlp.experts.local_experts." +
                                                      std::to_string(i) + ".linear_fc1.weight",
                                                  {16}, values));
      }
      w.commit();
    }
    state.PauseTiming();
    fs::remove(path);
    state.ResumeTiming();
  }
  state.counters["seconds_per_tensor"] =
      benchmark::Counter(static_cast<double>(n) * state.iterations(),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_DigestBytes)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(4)
    ->Arg(8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RecordWrite, full, Storage::kFull)
    ->UseRealTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RecordWrite, digest, Storage::kDigest)
    ->UseRealTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RecordWriteManyTensors)
    ->ArgName("tensors")
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Arg(16384)
    ->UseRealTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  struct statvfs v;
  if (::statvfs(bench_tmp_dir().c_str(), &v) == 0) {
    benchmark::AddCustomContext("tmpdir", bench_tmp_dir());
    benchmark::AddCustomContext("tmpdir_free_GB",
                                std::to_string(static_cast<double>(v.f_bavail) * v.f_frsize / 1e9));
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
