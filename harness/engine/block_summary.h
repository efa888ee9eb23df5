// File: harness/engine/block_summary.h
//
// A digest-only record's view of a device tensor: kernels::block_summaries computes, where the
// tensor lives, its block digests and non-finite elements (16 + 24 bytes per block of
// record::kDigestBlockElements); the step recorder copies those rows to the host and decodes
// them here into what record::RecordWriter writes.
#pragma once

#include <ATen/ATen.h>

#include "harness/record/digest.h"
#include "harness/record/finite.h"

namespace mtp::engine {

/// The record's digest (whole and per block) and non-finite summary of one tensor.
struct BlockSummary {
  record::TensorDigest digest;
  record::NonFinite nonfinite;
};

/// decode_block_summaries: from kernels::block_summaries(t, record::kDigestBlockElements) copied
/// to the host (int64 [blocks, 5], contiguous) and t's element size in bytes: the digest (the
/// tensor digest combined from the block digests, record::combine_block_digests), the total
/// non-finite count, the first non-finite's flat index (−1: none) and its bits masked to the
/// element's width. Equal to record::digest_bytes and record::find_nonfinite of t's bytes
/// (block_summary_test.cc). Throws InternalError for another shape or dtype.
BlockSummary decode_block_summaries(const at::Tensor& host_rows, int element_size);

}  // namespace mtp::engine
