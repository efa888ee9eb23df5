// File: harness/model/linear_benchmark.cc
//
// The host's cost of one bias-free linear layer, forward and backward (issue 25 §4): the
// harness's one-node linear (model/linear.h) against its anchor, LibTorch's composite
// at::matmul(x, w.t()) (four autograd nodes), in the same process:
//
//   BM_Linear/<impl>/<shape>/<device>   impl: composite | node; shape: host (x [8, 2, 16], W [48,
//   16]:
//                                       the GEMMs take nanoseconds, so the row is the host's
//                                       dispatch and autograd time) | small (x [2048, 1, 1024],
//                                       W [5632, 1024]: the small model's fc1, CUDA only)
//
// One iteration: y = linear(x, W) with x and W leaves that need grads, y.backward(g), both grads
// dropped (every iteration writes them first-time). fp32 on the CPU (one intra-op thread), bf16 on
// CUDA with a device synchronisation per iteration. The time column is one linear's forward and
// backward.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <string>
#include <vector>

#include "harness/model/linear.h"
#include "kernels/device_sync.h"

namespace {

struct Shape {
  std::vector<int64_t> x;
  int64_t out;
};

Shape shape_of(int64_t which) {
  if (which == 0) return {{8, 2, 16}, 48};
  return {{2048, 1, 1024}, 5632};
}

void BM_Linear(benchmark::State& state, bool node, int64_t which, bool cuda) {
  if (cuda && !at::hasCUDA()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  at::set_num_threads(1);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  const Shape s = shape_of(which);
  auto opts = at::TensorOptions()
                  .dtype(cuda ? at::kBFloat16 : at::kFloat)
                  .device(cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU));
  auto x = at::randn(s.x, opts).requires_grad_();
  auto w = at::randn({s.out, s.x.back()}, opts).requires_grad_();
  auto y_sizes = s.x;
  y_sizes.back() = s.out;
  auto g = at::randn(y_sizes, opts);
  for (auto _ : state) {
    auto y = node ? mtp::model::linear_node(x, w) : at::matmul(x, w.t());
    y.backward(g);
    x.mutable_grad().reset();
    w.mutable_grad().reset();
    mtp::kernels::device_sync(g);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (const char* shape : {"host", "small"}) {
    for (const char* device : {"cpu", "cuda"}) {
      const bool small = std::string(shape) == "small", cuda = std::string(device) == "cuda";
      if (small && !cuda) continue;  // three 23.6-GFLOP GEMMs: the CPU rows ask the host's cost
      for (const char* impl : {"composite", "node"}) {
        const bool node = std::string(impl) == "node";
        auto* b = benchmark::RegisterBenchmark(
            (std::string("BM_Linear/") + impl + "/" + shape + "/" + device).c_str(),
            [=](benchmark::State& st) { BM_Linear(st, node, small ? 1 : 0, cuda); });
        if (cuda) b->UseRealTime();
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
