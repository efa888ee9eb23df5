// Tests of the step recorder's non-finite scan on a tensor's device (nonfinite_scan, the path a
// GPU digest-only tensor takes): the same count, first index and bits as the host scan of the
// bytes (record/finite.h) in every float dtype, and nothing for integers or empty tensors.
#include "harness/engine/step_recorder.h"

#include <gtest/gtest.h>

#include <ATen/Context.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <regex>
#include <string>

#include "harness/engine/git_revision.h"
#include "harness/record/finite.h"

namespace mtp::engine {
namespace {

record::DType record_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return record::DType::kF32;
    case at::kDouble:
      return record::DType::kF64;
    default:
      return record::DType::kBF16;
  }
}

TEST(NonFiniteScanTest, AgreesWithTheHostScanOfTheBytes) {
  const double inf = std::numeric_limits<double>::infinity();
  for (at::ScalarType type : {at::kFloat, at::kDouble, at::kBFloat16}) {
    for (const std::vector<double>& values : std::vector<std::vector<double>>{
             {1.0, 2.0, 3.0}, {1.0, -inf, NAN, inf}, {-NAN, 0.5}, {0.0, -0.0, 1e30, inf}}) {
      const at::Tensor t =
          at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(type).view({-1, 1});
      const at::Tensor scan = nonfinite_scan(t);
      ASSERT_EQ(scan.numel(), 3);
      const record::NonFinite host =
          record::find_nonfinite(t.data_ptr(), t.nbytes(), record_type(type));
      const int bits = 8 * static_cast<int>(t.element_size());
      const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      EXPECT_EQ(scan[0].item<int64_t>(), host.count) << type << " " << values.size();
      if (host.count > 0) {
        EXPECT_EQ(scan[1].item<int64_t>(), host.first_index) << type;
        EXPECT_EQ(static_cast<uint64_t>(scan[2].item<int64_t>()) & mask, host.first_bits) << type;
      }
    }
  }
}

// On the GPU (the path it exists for): the same answer as the host scan of the copied bytes.
TEST(NonFiniteScanTest, AgreesWithTheHostScanOnTheGpu_CUDA) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (at::ScalarType type : {at::kFloat, at::kDouble, at::kBFloat16}) {
    at::Tensor t = at::randn({1000, 70}, at::TensorOptions().dtype(at::kDouble)).to(type);
    t.view({-1})[12345] = -INFINITY;
    t.view({-1})[5000] = NAN;
    t.view({-1})[69999] = INFINITY;
    const at::Tensor host = t.contiguous();
    const at::Tensor scan = nonfinite_scan(t.to(at::kCUDA)).cpu();
    const record::NonFinite want =
        record::find_nonfinite(host.data_ptr(), host.nbytes(), record_type(type));
    EXPECT_EQ(want.count, 3);
    EXPECT_EQ(scan[0].item<int64_t>(), want.count) << type;
    EXPECT_EQ(scan[1].item<int64_t>(), want.first_index) << type;
    const int bits = 8 * static_cast<int>(t.element_size());
    const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    EXPECT_EQ(static_cast<uint64_t>(scan[2].item<int64_t>()) & mask, want.first_bits) << type;
  }
}

TEST(NonFiniteScanTest, IntegersAndEmptyTensorsHoldNone) {
  const at::Tensor ints = at::full({4}, 0x7f800000, at::kInt);  // +inf's bits, as an int32
  EXPECT_EQ(nonfinite_scan(ints)[0].item<int64_t>(), 0);
  EXPECT_EQ(nonfinite_scan(at::empty({0}, at::kFloat))[0].item<int64_t>(), 0);
}

}  // namespace
}  // namespace mtp::engine

namespace mtp::engine {
namespace {

// Issue 20: the revision records carry is taken at build time (it was taken when CMake
// configured, so a rebuild after a commit recorded the commit before).
TEST(GitRevisionTest, IsTheSourceTreesHeadWhenBuilt) {
  const std::string revision = git_revision();
  const std::regex form("[0-9a-f]{12}(-dirty)?|unknown");
  ASSERT_TRUE(std::regex_match(revision, form)) << revision;
  std::FILE* git =
      ::popen("git -C '" MTP_SOURCE_DIR "' rev-parse --short=12 HEAD 2>/dev/null", "r");
  ASSERT_NE(git, nullptr);
  char head[64] = {0};
  const bool read = std::fgets(head, sizeof head, git) != nullptr;
  if (::pclose(git) != 0 || !read) GTEST_SKIP() << "not a git checkout";
  EXPECT_EQ(revision.substr(0, 12), std::string(head).substr(0, 12))
      << "built from another commit than the checkout's HEAD: rebuild (ci/build.sh)";
}

}  // namespace
}  // namespace mtp::engine
