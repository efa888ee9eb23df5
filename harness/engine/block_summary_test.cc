// Tests of decode_block_summaries (block_summary.h) over kernels::block_summaries on the CPU:
// the digest-only record's view of a tensor equals what the record's own host code computes from
// the tensor's bytes (record::digest_bytes, record::find_nonfinite), for every floating dtype
// with non-finite values planted in several blocks, for none, and for an integer dtype. The
// CUDA kernels are held to the CPU rows bitwise by kernels/ops_cuda_test.cc.
#include "harness/engine/block_summary.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "harness/common/error.h"
#include "harness/engine/dtypes.h"
#include "harness/record/record.h"
#include "kernels/ops.h"

namespace mtp::engine {
namespace {

void expect_decoded_equals_host(const at::Tensor& t) {
  SCOPED_TRACE(c10::str(t.scalar_type(), " ", t.numel(), " elements"));
  const at::Tensor rows = kernels::block_summaries(t, record::kDigestBlockElements);
  const BlockSummary got = decode_block_summaries(rows, static_cast<int>(t.element_size()));
  const size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
  const record::TensorDigest want =
      record::digest_bytes(t.data_ptr(), nbytes, static_cast<int>(t.element_size()));
  EXPECT_EQ(got.digest.whole, want.whole);
  ASSERT_EQ(got.digest.blocks.size(), want.blocks.size());
  for (size_t b = 0; b < want.blocks.size(); ++b) {
    EXPECT_EQ(got.digest.blocks[b], want.blocks[b]) << "block " << b;
  }
  const record::NonFinite nf =
      record::find_nonfinite(t.data_ptr(), nbytes, record_dtype(t.scalar_type()));
  EXPECT_EQ(got.nonfinite.count, nf.count);
  EXPECT_EQ(got.nonfinite.first_index, nf.first_index);
  EXPECT_EQ(got.nonfinite.first_bits, nf.first_bits);
}

TEST(BlockSummaryTest, DecodedSummariesEqualTheRecordsHostDigestAndNonFiniteScan) {
  at::manual_seed(3);
  // Three blocks, the last one short; non-finite values at the end of block 0, inside block 1
  // (several) and as the very last element.
  const int64_t n = 2 * record::kDigestBlockElements + 4321;
  const std::vector<int64_t> planted = {record::kDigestBlockElements - 1,
                                        record::kDigestBlockElements + 17,
                                        record::kDigestBlockElements + 18, n - 1};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> values = {-inf, nan, inf, nan};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
    const at::Tensor clean = at::randn({n}).to(dtype);
    expect_decoded_equals_host(clean);
    at::Tensor dirty = clean.clone();
    for (size_t i = 0; i < planted.size(); ++i) dirty[planted[i]] = values[i];
    expect_decoded_equals_host(dirty);
    const BlockSummary s =
        decode_block_summaries(kernels::block_summaries(dirty, record::kDigestBlockElements),
                               static_cast<int>(dirty.element_size()));
    EXPECT_EQ(s.nonfinite.count, 4);
    EXPECT_EQ(s.nonfinite.first_index, record::kDigestBlockElements - 1);
    EXPECT_EQ(record::nonfinite_text(s.nonfinite.first_bits, record_dtype(dtype)), "-inf");
    // Only the second and third blocks' non-finite values: the first is in block 1.
    at::Tensor later = clean.clone();
    later[n - 1] = nan;
    later[record::kDigestBlockElements + 5] = inf;
    const BlockSummary l =
        decode_block_summaries(kernels::block_summaries(later, record::kDigestBlockElements),
                               static_cast<int>(later.element_size()));
    EXPECT_EQ(l.nonfinite.count, 2);
    EXPECT_EQ(l.nonfinite.first_index, record::kDigestBlockElements + 5);
  }
  // A 2-D, non-contiguous view is summarized as its contiguous copy; integers hold no
  // non-finite value whatever their bits.
  const at::Tensor m = at::randn({300, 500}).t();
  expect_decoded_equals_host(m.contiguous());
  const BlockSummary mv =
      decode_block_summaries(kernels::block_summaries(m, record::kDigestBlockElements),
                             static_cast<int>(m.element_size()));
  EXPECT_EQ(mv.digest.whole,
            record::digest_bytes(m.contiguous().data_ptr(), m.numel() * 4, 4).whole);
  const at::Tensor ints = at::full({70000}, int64_t{0x7ff0000000000001LL}, at::kLong);
  const BlockSummary i =
      decode_block_summaries(kernels::block_summaries(ints, record::kDigestBlockElements), 8);
  EXPECT_EQ(i.nonfinite.count, 0);
  EXPECT_EQ(i.nonfinite.first_index, -1);
}

TEST(BlockSummaryTest, RowsOfAnotherShapeAreRefused) {
  EXPECT_THROW(decode_block_summaries(at::zeros({2, 2}, at::kLong), 4), InternalError);
  EXPECT_THROW(decode_block_summaries(at::zeros({2, 5}, at::kInt), 4), InternalError);
  EXPECT_THROW(decode_block_summaries(at::zeros({2, 5}, at::kLong), 3), InternalError);
  const BlockSummary empty = decode_block_summaries(at::zeros({0, 5}, at::kLong), 4);
  EXPECT_EQ(empty.nonfinite.count, 0);
  EXPECT_TRUE(empty.digest.blocks.empty());
}

}  // namespace
}  // namespace mtp::engine
