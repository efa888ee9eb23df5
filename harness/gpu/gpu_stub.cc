// The GPU entry points of a build without CUDA LibTorch: each says so.
#include "harness/common/error.h"
#include "harness/gpu/cuda_graph.h"
#include "harness/gpu/device_clock.h"
#include "harness/gpu/gpu.h"
#include "harness/gpu/side_stream.h"

namespace mtp::gpu {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  throw InputError(std::string(what) +
                   ": this mtp-harness was built without CUDA LibTorch "
                   "(build on the GPU machine with ci/gpu.sh)");
}

}  // namespace

bool cuda_build() { return false; }
std::map<std::string, std::string> gpu_fingerprint(int) { no_cuda("GPU fingerprint"); }
void set_current_device(int) { no_cuda("device \"cuda\""); }
uint64_t device_free_memory_bytes(int) { no_cuda("device \"cuda\""); }
AllocatorBytes allocator_bytes(int) { no_cuda("device \"cuda\""); }
void release_cached_memory(int) { no_cuda("device \"cuda\""); }
std::unique_ptr<transport::Transport> make_nccl_transport(const LaunchEnv&, int,
                                                          std::chrono::milliseconds) {
  no_cuda("NCCL transport");
}

struct CudaGraph::Impl {};
CudaGraph::CudaGraph(int, CaptureScope) { no_cuda("CUDA graphs"); }
CudaGraph::CudaGraph(const CudaGraph&, bool) { no_cuda("CUDA graphs"); }
CudaGraph::~CudaGraph() = default;
void CudaGraph::run_eagerly(const std::function<void()>&) { no_cuda("CUDA graphs"); }
void CudaGraph::capture(const std::function<void()>&) { no_cuda("CUDA graphs"); }
void CudaGraph::replay() { no_cuda("CUDA graphs"); }
bool CudaGraph::captured() const { return false; }

struct DeviceClock::Impl {};
DeviceClock::DeviceClock(int) { no_cuda("DeviceClock"); }
DeviceClock::~DeviceClock() = default;
int DeviceClock::mark() { no_cuda("DeviceClock"); }
double DeviceClock::elapsed_ms(int, int) { no_cuda("DeviceClock"); }
void DeviceClock::clear() {}

// Without CUDA a device is the CPU (a CUDA device is refused when the run is set up), where the
// side stream has nothing to order.
struct SideStreamFence::Impl {};
SideStreamFence::SideStreamFence(const at::Device& device) {
  if (device.is_cuda()) no_cuda("side stream");
}
SideStreamFence::~SideStreamFence() = default;
struct SideStreamFence::Scope::Impl {};
SideStreamFence::Scope::Scope(const SideStreamFence&, bool) {}
SideStreamFence::Scope::~Scope() = default;
at::Tensor on_side_stream(const at::Device& device, const std::function<at::Tensor()>& work) {
  if (device.is_cuda()) no_cuda("side stream");
  return work();
}
at::Tensor side_copy(const at::Tensor& t, const at::Device& to) {
  if (to.is_cuda()) no_cuda("side stream");
  return t.to(to);
}

}  // namespace mtp::gpu
