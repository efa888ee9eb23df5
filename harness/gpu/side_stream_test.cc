// The expert all-to-alls' side stream (side_stream.h). On the CPU every entry point must leave
// values and threads alone. On a GPU (skipped without one): a section sees everything the
// default stream was given before it (no fence); a section inside a fence's scope runs while the
// default stream is still busy with work issued after the fence (the overlap; it failed on an
// H100 while the host copy went through pageable memory); a tensor a section returns is not
// overwritten by a later side-stream allocation before the default stream's reads of it have run.
#include "harness/gpu/side_stream.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "harness/gpu/gpu.h"

#if defined(MTP_WITH_CUDA)
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace mtp::gpu {
namespace {

TEST(SideStreamTest, CpuSectionReturnsWorksTensorUnchanged) {
  const at::Tensor x = at::arange(7, at::kDouble).mul_(0.1);
  int calls = 0;
  const at::Tensor out = on_side_stream(at::kCPU, [&] {
    ++calls;
    return x;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(out.is_same(x));
}

TEST(SideStreamTest, CpuSideCopyIsThePlainCopy) {
  const at::Tensor x = at::arange(5, at::kFloat);
  EXPECT_TRUE(side_copy(x, at::kCPU).is_same(x));
}

TEST(SideStreamTest, CpuFenceAndScopeDoNothing) {
  const SideStreamFence fence(at::kCPU);
  const SideStreamFence::Scope scope(fence, /*side_stream_current=*/true);
  const at::Tensor out = on_side_stream(at::kCPU, [] { return at::full({2}, 3.5, at::kDouble); });
  EXPECT_EQ(out[1].item<double>(), 3.5);
}

TEST(SideStreamTest, CudaDeviceWithoutCudaBuildIsRefused) {
  if (cuda_build()) GTEST_SKIP() << "a CUDA build has the side stream";
  EXPECT_THROW(SideStreamFence(at::Device(at::kCUDA, 0)), std::exception);
  EXPECT_THROW(on_side_stream(at::Device(at::kCUDA, 0), [] { return at::Tensor(); }),
               std::exception);
  EXPECT_THROW(side_copy(at::zeros({2}), at::Device(at::kCUDA, 0)), std::exception);
}

#if defined(MTP_WITH_CUDA)

bool gpu_present() { return cuda_build() && torch::cuda::device_count() > 0; }

constexpr int64_t kBusyCycles = int64_t{4} << 30;  // about 2 s of one SM's clock

TEST(SideStreamTest, SectionWaitsForTheDefaultStreamsEarlierWork) {
  if (!gpu_present()) GTEST_SKIP() << "needs a GPU";
  const at::Device gpu(at::kCUDA, 0);
  at::Tensor x = at::zeros({1024}, at::TensorOptions(at::kFloat).device(gpu));
  at::cuda::sleep(kBusyCycles);  // the default stream is busy, then writes x
  x.fill_(2.5);
  const at::Tensor host = on_side_stream(gpu, [&] { return side_copy(x, at::kCPU); });
  EXPECT_TRUE(host.is_pinned());
  EXPECT_EQ(host.sum().item<double>(), 2.5 * 1024);
}

TEST(SideStreamTest, SectionInsideFenceScopeOverlapsLaterCompute) {
  if (!gpu_present()) GTEST_SKIP() << "needs a GPU";
  const at::Device gpu(at::kCUDA, 0);
  at::Tensor x = at::full({4096}, 1.25, at::TensorOptions(at::kFloat).device(gpu));
  // Once before, so that the page-locked host block exists (cudaHostAlloc is not on the clock);
  // other values, so that a copy that did not run leaves them behind.
  const at::Tensor other = at::full({4096}, -3.0, at::TensorOptions(at::kFloat).device(gpu));
  on_side_stream(gpu, [&] { return side_copy(other, at::kCPU); });
  const SideStreamFence fence(gpu);  // x's fill is before the fence
  at::cuda::sleep(kBusyCycles);      // the paired compute node, after the fence
  at::Tensor host;
  bool default_busy_after_section = false;
  double section_ms = 0;
  bool on_side = false;
  std::thread side([&] {
    const SideStreamFence::Scope scope(fence, /*side_stream_current=*/false);
    const auto t0 = std::chrono::steady_clock::now();
    host = on_side_stream(gpu, [&] {
      on_side = c10::cuda::getCurrentCUDAStream(0) != c10::cuda::getDefaultCUDAStream(0);
      return side_copy(x, at::kCPU);
    });
    section_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const cudaError_t q = cudaStreamQuery(c10::cuda::getDefaultCUDAStream(0).stream());
    default_busy_after_section = q == cudaErrorNotReady;
  });
  side.join();
  EXPECT_TRUE(default_busy_after_section)
      << "the section waited for compute issued after its fence (no overlap): it took "
      << section_ms << " ms";
  EXPECT_TRUE(on_side) << "the section's work ran on the default stream";
  EXPECT_EQ(host.sum().item<double>(), 1.25 * 4096);
  torch::cuda::synchronize();
}

TEST(SideStreamTest, ReturnedTensorIsNotOverwrittenBeforeDefaultStreamReadsRun) {
  if (!gpu_present()) GTEST_SKIP() << "needs a GPU";
  const at::Device gpu(at::kCUDA, 0);
  const at::TensorOptions f32 = at::TensorOptions(at::kFloat).device(gpu);
  at::Tensor made = on_side_stream(gpu, [&] { return at::full({1 << 20}, 7.0, f32); });
  // Every kernel the busy part launches runs once first: CUDA loads a module on its first launch
  // (lazy loading), which can wait for the sleep below and leave the default stream idle before
  // the check (H100, 2026-12-07: "finished its read before the test could check"; the likely
  // cause, not yet confirmed by a rerun).
  EXPECT_EQ(made.sum().item<double>(), 7.0 * (1 << 20));
  at::cuda::sleep(1);
  torch::cuda::synchronize();
  const SideStreamFence fence(gpu);     // after `made` was written
  at::cuda::sleep(kBusyCycles);         // the default stream is busy ...
  const at::Tensor total = made.sum();  // ... then reads `made`
  made.reset();                         // freed on the host while that read waits
  const bool busy =
      cudaStreamQuery(c10::cuda::getDefaultCUDAStream(0).stream()) == cudaErrorNotReady;
  {
    // Inside the fence's scope the side stream does not wait for the read: if the allocator gave
    // `made`'s memory to this allocation without the read having run, -1 would overwrite it.
    // (On an H100 with LibTorch 2.11 the address was the same, and the read still saw 7: the
    // check is the values, not where the allocator puts the block.)
    const SideStreamFence::Scope scope(fence, /*side_stream_current=*/false);
    on_side_stream(gpu, [&] { return at::full({1 << 20}, -1.0, f32); });
  }
  EXPECT_TRUE(busy) << "the default stream finished its read before the test could check";
  EXPECT_EQ(total.item<double>(), 7.0 * (1 << 20));
}

#endif  // MTP_WITH_CUDA

}  // namespace
}  // namespace mtp::gpu
