// libFuzzer target for the layout grammar and validation (ci/sanitize.sh runs it from the seed
// corpus in fuzz_corpus/layout_fuzzer/). Input: three parameter bytes, then the layout string.
//   byte 0: P = 1 + b % 16
//   byte 1: N = the number of `t` in the expanded layout when b >= 128 (so validation goes past
//           R4), else b % 64
//   byte 2: D likewise from the number of `m` (b >= 128), else b % 4
// Every input must either build a layout whose invariants hold or throw LayoutError; any other
// exception, a crash or a sanitizer report is a finding.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/layout/layout.h"

namespace {

using mtp::layout::LayoutError;

int count_of(const mtp::layout::ParsedLayout& p, char c) {
  int n = 0;
  for (const auto& s : p.stages) n += static_cast<int>(std::count(s.begin(), s.end(), c));
  return n;
}

/// Aborts (a finding) unless every decoder layer and MTP depth is on exactly one stage, in order.
void check_invariants(const mtp::layout::PipelineLayout& l) {
  if (l.num_stages() != l.pipeline_size * l.virtual_size) std::abort();
  std::vector<int> layers, depths;
  for (int i = 0; i < l.num_stages(); ++i) {
    const auto& s = l.stages[static_cast<size_t>(i)];
    if (s.stage_index != i || s.pipeline_rank != i % l.pipeline_size) std::abort();
    if (&l.at(s.pipeline_rank, s.virtual_stage) != &s) std::abort();
    layers.insert(layers.end(), s.decoder_layers.begin(), s.decoder_layers.end());
    depths.insert(depths.end(), s.mtp_depths.begin(), s.mtp_depths.end());
  }
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    if (layers[static_cast<size_t>(i)] != i) std::abort();
  }
  for (int k = 0; k < static_cast<int>(depths.size()); ++k) {
    if (depths[static_cast<size_t>(k)] != k + 1) std::abort();
  }
  if (static_cast<int>(layers.size()) != l.num_layers) std::abort();
  if (static_cast<int>(depths.size()) != l.mtp_num_layers) std::abort();
  if (!l.stages.front().has_embedding || !l.loss_stage().has_loss) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 3, size - 3);
  const int pipeline_size = 1 + data[0] % 16;
  int num_layers = data[1] % 64;
  int mtp_num_layers = data[2] % 4;
  try {
    const auto parsed = mtp::layout::parse_layout(text);
    if (data[1] >= 128) num_layers = count_of(parsed, 't');
    if (data[2] >= 128) mtp_num_layers = count_of(parsed, 'm');
  } catch (const LayoutError&) {
  }
  try {
    const auto l = mtp::layout::build_layout(text, pipeline_size, num_layers, mtp_num_layers);
    check_invariants(l);
    if (mtp::layout::format_rank_map(l).empty()) std::abort();
  } catch (const LayoutError&) {
  }
  try {
    const auto l = mtp::layout::default_layout(pipeline_size, 1 + data[0] / 16 % 4, num_layers,
                                               mtp_num_layers);
    check_invariants(l);
  } catch (const LayoutError&) {
  }
  return 0;
}
