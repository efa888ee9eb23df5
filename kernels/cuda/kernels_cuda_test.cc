// The CUDA kernels (kernels_cuda.h) against the CPU kernels: the same bits for fp32 and bf16
// inputs (bf16 also within the 1e-2 bf16 tolerance, reported separately), within 1e-12 for fp64
// (platform exp/log); bitwise repeatability on fresh inputs, batch invariance, poisoned outputs
// fully overwritten, and the documented handling of bad ids, labels and workspaces. Every test
// is named *_CUDA and skips when no CUDA device is present (CTest label gpu).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <type_traits>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/testing/attention_problem.h"
#include "kernels/testing/testbed.h"

namespace mtp::kernels::cuda {
namespace {

using namespace mtp::kernels::testing;  // NOLINT(build/namespaces)

bool has_cuda_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the error this leaves behind
    return false;
  }
  return count > 0;
}

#define MTP_SKIP_WITHOUT_CUDA_DEVICE()                                   \
  do {                                                                   \
    if (!has_cuda_device()) {                                            \
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or 0)"; \
    }                                                                    \
  } while (0)

/// DeviceBuffer: n elements of device memory, optionally uploaded from a host vector.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ > 0) {
      MTP_CUDA_CHECK(cudaMalloc(&ptr_, n_ * sizeof(T)));
    }
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (n_ > 0) {
      MTP_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) {
      cudaFree(ptr_);
    }
  }
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return n_ * sizeof(T); }
  void fill_bytes(unsigned char byte) {
    if (n_ > 0) {
      MTP_CUDA_CHECK(cudaMemset(ptr_, byte, bytes()));
    }
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_ > 0) {
      MTP_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    }
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t n_ = 0;
};

/// Stream: a non-default stream, so that the kernels' `stream` argument is exercised.
class Stream {
 public:
  Stream() { MTP_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }
  void sync() const { MTP_CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

/// Uploads and poison fills run on the legacy default stream (cudaMemcpy from pageable memory
/// may return before its DMA lands); the kernels run on a non-blocking stream that does not wait
/// for it, so every run synchronises the device before its first launch.
void inputs_ready() { MTP_CUDA_CHECK(cudaDeviceSynchronize()); }

// --- GPU runs mirroring testing::run_cpu -------------------------------------------------------

template <typename T>
std::vector<T> run_gpu(const EmbeddingProblem<T>& p, unsigned char poison) {
  Stream stream;
  DeviceBuffer<T> grad(p.grad_out);
  DeviceBuffer<int64_t> ids(p.ids);
  DeviceBuffer<T> table(static_cast<size_t>(p.vocab * p.hidden));
  table.fill_bytes(poison);
  const size_t bytes = embedding_backward_workspace_bytes(p.tokens, p.vocab);
  DeviceBuffer<unsigned char> ws(bytes);
  ws.fill_bytes(poison);
  inputs_ready();
  embedding_backward<T>(grad.get(), ids.get(), p.tokens, p.hidden, p.vocab, table.get(), ws.get(),
                        bytes, stream.get());
  stream.sync();
  return table.download();
}

template <typename T>
RmsOutputs<T> run_gpu(const RmsProblem<T>& p, unsigned char poison) {
  using A = Acc<T>;
  Stream stream;
  const size_t n = static_cast<size_t>(p.rows * p.hidden);
  DeviceBuffer<T> x(p.x), w(p.w), dy(p.dy), y(n), dx(n), dw(static_cast<size_t>(p.hidden));
  DeviceBuffer<A> rstd(static_cast<size_t>(p.rows));
  const size_t bytes = rms_norm_backward_workspace_bytes(p.rows, p.hidden, sizeof(A) == 8);
  DeviceBuffer<unsigned char> ws(bytes);
  for (auto* b : {&y, &dx, &dw}) {
    b->fill_bytes(poison);
  }
  rstd.fill_bytes(poison);
  ws.fill_bytes(poison);
  inputs_ready();
  rms_norm_forward<T>(x.get(), w.get(), p.rows, p.hidden, p.eps, y.get(), rstd.get(), stream.get());
  rms_norm_backward<T>(dy.get(), x.get(), w.get(), rstd.get(), p.rows, p.hidden, dx.get(), dw.get(),
                       ws.get(), bytes, stream.get());
  stream.sync();
  return {y.download(), rstd.download(), dx.download(), dw.download()};
}

template <typename T>
CeOutputs<T> run_gpu(const CeProblem<T>& p, unsigned char poison, bool masked = true) {
  using A = Acc<T>;
  Stream stream;
  const size_t rows = static_cast<size_t>(p.rows);
  DeviceBuffer<T> logits(p.logits), grad(static_cast<size_t>(p.rows * p.vocab));
  DeviceBuffer<int64_t> labels(p.labels);
  DeviceBuffer<A> mask(p.mask), grad_loss(p.grad_loss), loss(rows), mx(rows), sum(rows);
  grad.fill_bytes(poison);
  for (auto* b : {&loss, &mx, &sum}) {
    b->fill_bytes(poison);
  }
  const A* m = masked ? mask.get() : nullptr;
  inputs_ready();
  cross_entropy_forward<T>(logits.get(), labels.get(), m, p.rows, p.vocab, loss.get(), mx.get(),
                           sum.get(), stream.get());
  cross_entropy_backward<T>(logits.get(), labels.get(), m, grad_loss.get(), mx.get(), sum.get(),
                            p.rows, p.vocab, grad.get(), stream.get());
  stream.sync();
  return {loss.download(), mx.download(), sum.download(), grad.download()};
}

// --- comparison policy -------------------------------------------------------------------------

/// GPU vs CPU: bitwise for outputs of fp32 arithmetic (fp32 and bf16 inputs); bf16-rounded
/// outputs are also checked against the bf16 tolerance first, so that a failure says whether
/// they are merely not bitwise or actually wrong; fp64 within 1e-12 (platform exp/log).
template <typename V>
void expect_gpu_matches_cpu(const std::string& what, const std::vector<V>& gpu,
                            const std::vector<V>& cpu, int64_t width = 0) {
  if (std::is_same<V, double>::value) {
    EXPECT_TRUE(close(what, widen(gpu), widen(cpu), rounded_tolerance<double>(), width));
    return;
  }
  if (std::is_same<V, Bf16>::value) {
    EXPECT_TRUE(close(what + " (bf16 tolerance)", widen(gpu), widen(cpu), rounded_tolerance<Bf16>(),
                      width));
  }
  EXPECT_TRUE(bitwise_equal(what + " (bitwise)", gpu, cpu, width));
}

template <typename T>
class KernelsCudaTest : public ::testing::Test {
 protected:
  uint64_t seed(const std::string& what) const { return current_test_seed(what); }
};
TYPED_TEST_SUITE(KernelsCudaTest, InputTypes, TypeNames);

// --- GPU vs CPU --------------------------------------------------------------------------------

TYPED_TEST(KernelsCudaTest, EmbeddingBackwardMatchesCpu_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  using T = TypeParam;
  auto shapes = embedding_shapes();
  shapes.push_back({4096, 1027, 32000});  // large vocabulary, most rows empty
  shapes.push_back({20000, 64, 100});     // ~200 contributions per row
  shapes.push_back({2048, 1024, 4096});   // the small model's width: 16-byte vectors, 128+ threads
  for (const auto& s : shapes) {
    SCOPED_TRACE("T=" + std::to_string(s.tokens) + " H=" + std::to_string(s.hidden) +
                 " V=" + std::to_string(s.vocab));
    const auto p = EmbeddingProblem<T>::make(s.tokens, s.hidden, s.vocab, this->seed("p"));
    expect_gpu_matches_cpu("grad_table", run_gpu(p, 0xff), run_cpu(p, 0x00), s.hidden);
  }
}

TYPED_TEST(KernelsCudaTest, RmsNormMatchesCpu_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  using T = TypeParam;
  auto shapes = rms_shapes();
  shapes.push_back({300, 4101});
  shapes.push_back({1, 7168});
  shapes.push_back({1000, 64});
  for (const auto& s : shapes) {
    SCOPED_TRACE("rows x hidden = " + std::to_string(s.rows) + "x" + std::to_string(s.cols));
    const auto p = RmsProblem<T>::make(s.rows, s.cols, this->seed(std::to_string(s.cols)));
    const auto g = run_gpu(p, 0xff);
    const auto c = run_cpu(p, 0x00);
    expect_gpu_matches_cpu("y", g.y, c.y, p.hidden);
    expect_gpu_matches_cpu("rstd", g.rstd, c.rstd);
    expect_gpu_matches_cpu("dx", g.dx, c.dx, p.hidden);
    expect_gpu_matches_cpu("dweight", g.dw, c.dw);
  }
}

TYPED_TEST(KernelsCudaTest, CrossEntropyMatchesCpu_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  using T = TypeParam;
  auto shapes = ce_shapes();
  shapes.push_back({64, 50000});
  for (const auto& s : shapes) {
    SCOPED_TRACE("rows x vocab = " + std::to_string(s.rows) + "x" + std::to_string(s.cols));
    const auto p = CeProblem<T>::make(s.rows, s.cols, this->seed(std::to_string(s.cols)));
    for (bool masked : {true, false}) {
      SCOPED_TRACE(masked ? "masked" : "unmasked");
      const auto g = run_gpu(p, 0xff, masked);
      const auto c = run_cpu(p, 0x00, masked);
      expect_gpu_matches_cpu("loss", g.loss, c.loss);
      expect_gpu_matches_cpu("row_max", g.row_max, c.row_max);
      expect_gpu_matches_cpu("row_sum", g.row_sum, c.row_sum);
      expect_gpu_matches_cpu("grad_logits", g.grad_logits, c.grad_logits, p.vocab);
    }
  }
}

// --- determinism and batch invariance on the GPU -----------------------------------------------

TYPED_TEST(KernelsCudaTest, BitwiseRepeatableOnFreshInputs_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  using T = TypeParam;
  for (int rep = 0; rep < 10; ++rep) {
    SCOPED_TRACE("repeat " + std::to_string(rep));
    const std::string r = std::to_string(rep);
    const auto e = EmbeddingProblem<T>::make(3000, 257, 500, this->seed("e" + r));
    EXPECT_TRUE(bitwise_equal("grad_table", run_gpu(e, 0xff), run_gpu(e, 0x00), e.hidden));
    const auto n = RmsProblem<T>::make(700, 1030, this->seed("n" + r));
    const auto n1 = run_gpu(n, 0xff);
    const auto n2 = run_gpu(n, 0x00);
    EXPECT_TRUE(bitwise_equal("y", n1.y, n2.y, n.hidden));
    EXPECT_TRUE(bitwise_equal("dx", n1.dx, n2.dx, n.hidden));
    EXPECT_TRUE(bitwise_equal("dweight", n1.dw, n2.dw));
    const auto c = CeProblem<T>::make(40, 3000, this->seed("c" + r));
    const auto c1 = run_gpu(c, 0xff);
    const auto c2 = run_gpu(c, 0x00);
    EXPECT_TRUE(bitwise_equal("loss", c1.loss, c2.loss));
    EXPECT_TRUE(bitwise_equal("grad_logits", c1.grad_logits, c2.grad_logits, c.vocab));
  }
}

TYPED_TEST(KernelsCudaTest, RowResultsAreBatchInvariant_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  using T = TypeParam;
  const auto n = RmsProblem<T>::make(300, 1030, this->seed("n"));
  const auto all = run_gpu(n, 0xff);
  const int64_t h = n.hidden;
  for (int64_t r : {int64_t{0}, int64_t{63}, int64_t{64}, int64_t{299}}) {
    SCOPED_TRACE("rms row " + std::to_string(r));
    const auto one = run_gpu(n.row(r), 0x00);
    EXPECT_TRUE(bitwise_equal(
        "y", std::vector<T>(all.y.begin() + r * h, all.y.begin() + (r + 1) * h), one.y));
    EXPECT_TRUE(bitwise_equal(
        "dx", std::vector<T>(all.dx.begin() + r * h, all.dx.begin() + (r + 1) * h), one.dx));
  }
  const auto c = CeProblem<T>::make(50, 3000, this->seed("c"));
  const auto call = run_gpu(c, 0xff);
  const int64_t v = c.vocab;
  for (int64_t r : {int64_t{0}, int64_t{25}, int64_t{49}}) {
    SCOPED_TRACE("ce row " + std::to_string(r));
    const auto one = run_gpu(c.row(r), 0x00);
    EXPECT_TRUE(bitwise_equal("loss", std::vector<Acc<T>>{call.loss[r]}, one.loss));
    EXPECT_TRUE(bitwise_equal(
        "grad_logits",
        std::vector<T>(call.grad_logits.begin() + r * v, call.grad_logits.begin() + (r + 1) * v),
        one.grad_logits));
  }
}

// --- documented edge behaviour -----------------------------------------------------------------

TEST(KernelsCudaEdgeTest, OutOfRangeIdsAndLabels_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  // An id outside [0, V) contributes nothing; the other rows are as on the CPU without it.
  EmbeddingProblem<float> e = EmbeddingProblem<float>::make(50, 8, 10, stable_seed("ids"));
  EmbeddingProblem<float> valid = e;
  e.ids[7] = 10;
  e.ids[9] = -3;
  // The CPU twin: those two tokens moved to row 0 with zero gradients (adding +0 to a sum that
  // starts at +0 changes no bits).
  for (int64_t h = 0; h < e.hidden; ++h) {
    valid.grad_out[7 * e.hidden + h] = 0.0f;
    valid.grad_out[9 * e.hidden + h] = 0.0f;
  }
  valid.ids[7] = 0;
  valid.ids[9] = 0;
  EXPECT_TRUE(bitwise_equal("grad_table", run_gpu(e, 0xff), run_cpu(valid, 0x00), e.hidden));
  // A label outside [0, V): NaN loss and NaN gradient row; other rows unaffected.
  CeProblem<float> c = CeProblem<float>::make(3, 20, stable_seed("labels"));
  const auto good = run_cpu(c, 0x00);
  c.labels[1] = 20;
  const auto g = run_gpu(c, 0x00);
  EXPECT_TRUE(std::isnan(g.loss[1]));
  EXPECT_TRUE(std::isnan(g.grad_logits[1 * 20 + 3]));
  EXPECT_EQ(float_bits(g.loss[0]), float_bits(good.loss[0]));
  EXPECT_EQ(float_bits(g.loss[2]), float_bits(good.loss[2]));
}

TEST(KernelsCudaEdgeTest, SmallWorkspaceAndBadSizesThrow_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<float> buf(64);
  DeviceBuffer<int64_t> ids(std::vector<int64_t>(8, 0));
  const size_t need = embedding_backward_workspace_bytes(8, 4);
  ASSERT_GT(need, 0u);
  DeviceBuffer<unsigned char> ws(need);
  EXPECT_THROW(embedding_backward<float>(buf.get(), ids.get(), 8, 2, 4, buf.get(), ws.get(),
                                         need - 1, nullptr),
               std::invalid_argument);
  EXPECT_THROW(embedding_backward_workspace_bytes(-1, 4), std::invalid_argument);
  EXPECT_THROW(rms_norm_backward<float>(buf.get(), buf.get(), buf.get(), buf.get(), 8, 4, nullptr,
                                        buf.get(), nullptr, 0, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cross_entropy_forward<float>(buf.get(), ids.get(), nullptr, 2, 0, buf.get(), nullptr,
                                            nullptr, nullptr),
               std::invalid_argument);
}

// --- Block digests (XXH3-128 per block) --------------------------------------------------------

/// Random bytes from a fixed LCG (no dependence on the testbed's element types).
std::vector<uint8_t> digest_input(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    b = static_cast<uint8_t>(seed >> 56);
  }
  return v;
}

/// GPU digests of bytes [offset, offset + n) of `host` (uploaded whole), the output poisoned
/// with `poison` first.
std::vector<uint64_t> gpu_digests(const std::vector<uint8_t>& host, size_t offset, size_t n,
                                  uint64_t block, unsigned char poison) {
  DeviceBuffer<uint8_t> in(host);
  const size_t blocks = (n + block - 1) / block;
  DeviceBuffer<uint64_t> out(2 * blocks);
  out.fill_bytes(poison);
  inputs_ready();
  Stream stream;
  block_digests(in.get() + offset, n, block, out.get(), stream.get());
  stream.sync();
  return out.download();
}

std::vector<uint64_t> cpu_digests(const std::vector<uint8_t>& host, size_t offset, size_t n,
                                  uint64_t block) {
  std::vector<uint64_t> out(2 * ((n + block - 1) / block));
  cpu::block_digests(host.data() + offset, n, block, out.data());
  return out;
}

TEST(BlockDigestsCudaTest, EqualTheCpuDigestsForEveryPathAndBlockSize_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<uint8_t> host = digest_input((size_t{1} << 21) + 64, 21);
  // Record blocks of 1-, 2-, 4- and 8-byte elements, and block sizes that leave every short and
  // long path (0–240 bytes, partial rounds, 1 KiB boundaries) for the last block.
  for (uint64_t block :
       {uint64_t{65536}, uint64_t{131072}, uint64_t{262144}, uint64_t{524288}, uint64_t{1000},
        uint64_t{1024}, uint64_t{241}, uint64_t{240}, uint64_t{17}, uint64_t{1}}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{8}, size_t{16}, size_t{100},
                     size_t{129}, size_t{240}, size_t{241}, size_t{1024}, size_t{1025},
                     size_t{262144 * 3 + 1000}, size_t{1} << 21}) {
      if (block < 64 && n > 100000) continue;  // millions of one-byte blocks: slow, no new path
      SCOPED_TRACE("block " + std::to_string(block) + " n " + std::to_string(n));
      EXPECT_EQ(gpu_digests(host, 0, n, block, 0xab), cpu_digests(host, 0, n, block));
    }
  }
}

TEST(BlockDigestsCudaTest, MisalignedInputsRepeatsAndPoisonedOutputs_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<uint8_t> host = digest_input(600000, 22);
  for (size_t offset : {size_t{1}, size_t{2}, size_t{4}, size_t{7}}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    EXPECT_EQ(gpu_digests(host, offset, 500000, 262144, 0x00),
              cpu_digests(host, offset, 500000, 262144));
  }
  // Bitwise repeatable, and every output word written whatever the poison.
  const auto a = gpu_digests(host, 0, 590000, 131072, 0x00);
  EXPECT_EQ(a, gpu_digests(host, 0, 590000, 131072, 0xff));
  EXPECT_EQ(a, cpu_digests(host, 0, 590000, 131072));
}

TEST(BlockDigestsCudaTest, BadArgumentsThrow_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<uint64_t> out(2);
  DeviceBuffer<uint8_t> in(std::vector<uint8_t>(8, 1));
  EXPECT_THROW(block_digests(in.get(), 8, 0, out.get(), nullptr), std::invalid_argument);
  EXPECT_THROW(block_digests(in.get(), 8, (uint64_t{1} << 19) + 1, out.get(), nullptr),
               std::invalid_argument);
  EXPECT_THROW(block_digests(nullptr, 8, 8, out.get(), nullptr), std::invalid_argument);
  EXPECT_NO_THROW(block_digests(nullptr, 0, 8, nullptr, nullptr));
}

// --- the harness's causal attention ------------------------------------------------------------

/// run_gpu: cuda::attention_forward then cuda::attention_backward on `stream`, outputs and
/// scratch poisoned with `poison` bytes (testing::run_cpu's GPU twin).
template <typename T>
AttentionOutputs<T> run_gpu(const AttentionProblem<T>& p, unsigned char poison) {
  using A = Acc<T>;
  const AttentionDims& d = p.dims;
  const size_t e = static_cast<size_t>(d.n * d.s * d.hn), rows = static_cast<size_t>(d.n * d.s);
  const size_t sq = static_cast<size_t>(d.n * d.s * d.s);
  DeviceBuffer<T> q(p.q), k(p.k), v(p.v), d_o(p.d_o), o(e), dq(e), dk(e), dv(e);
  DeviceBuffer<A> lse(rows), probs(sq), ds(sq), delta(rows);
  for (auto* b : {&o, &dq, &dk, &dv}) b->fill_bytes(poison);
  for (auto* b : {&lse, &probs, &ds, &delta}) b->fill_bytes(poison);
  inputs_ready();
  Stream stream;
  AttentionForwardBuffers<T> f;
  f.q = q.get(), f.k = k.get(), f.v = v.get(), f.o = o.get(), f.lse = lse.get();
  f.probs = probs.get();
  attention_forward<T>(f, d, p.scale, stream.get());
  AttentionBackwardBuffers<T> b;
  b.q = q.get(), b.k = k.get(), b.v = v.get(), b.d_o = d_o.get();
  b.lse = lse.get(), b.dq = dq.get(), b.dk = dk.get(), b.dv = dv.get();
  b.probs = probs.get(), b.ds = ds.get(), b.delta = delta.get();
  attention_backward<T>(b, d, p.scale, stream.get());
  stream.sync();
  return {o.download(), dq.download(), dk.download(), dv.download(), lse.download()};
}

TYPED_TEST(KernelsCudaTest, AttentionMatchesCpu_CUDA) {
  MTP_SKIP_WITHOUT_CUDA_DEVICE();
  using T = TypeParam;
  for (const AttentionDims& d : attention_shapes()) {
    const std::string name =
        "n " + std::to_string(d.n) + ", s " + std::to_string(d.s) + ", hn " + std::to_string(d.hn);
    SCOPED_TRACE(name);
    const auto p = AttentionProblem<T>::make(d.n, d.s, d.hn, this->seed(name));
    const auto cpu = run_cpu(p, 0x00);
    const auto gpu = run_gpu(p, 0xff);
    expect_gpu_matches_cpu("o", gpu.o, cpu.o, d.hn);
    expect_gpu_matches_cpu("lse", gpu.lse, cpu.lse, d.s);
    expect_gpu_matches_cpu("dq", gpu.dq, cpu.dq, d.hn);
    expect_gpu_matches_cpu("dk", gpu.dk, cpu.dk, d.hn);
    expect_gpu_matches_cpu("dv", gpu.dv, cpu.dv, d.hn);
    const auto again = run_gpu(p, 0x00);
    EXPECT_TRUE(bitwise_equal("o, a second GPU run", again.o, gpu.o, d.hn));
    EXPECT_TRUE(bitwise_equal("dq, a second GPU run", again.dq, gpu.dq, d.hn));
  }
}

}  // namespace
}  // namespace mtp::kernels::cuda
