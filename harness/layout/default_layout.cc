// File: harness/layout/default_layout.cc
//
// default_layout: Megatron's split when no layout string is given (P·V stages, decoder layers
// spread evenly, `E` with stage 0, every `m` and `L` on the last stage), written as the
// equivalent layout string and validated by build_layout.

#include <fmt/format.h>

#include <string>

#include "harness/layout/internal.h"
#include "harness/layout/layout.h"

namespace mtp::layout {

PipelineLayout default_layout(int pipeline_size, int virtual_size, int num_layers,
                              int mtp_num_layers) {
  const auto fail = [&](const std::string& what) {
    throw LayoutError(fmt::format("default layout (P = {}, V = {}, N = {}, D = {}): {}",
                                  pipeline_size, virtual_size, num_layers, mtp_num_layers, what));
  };
  if (pipeline_size < 1) fail("pipeline_size (P) must be at least 1");
  if (virtual_size < 1) fail("virtual_size (V) must be at least 1");
  if (num_layers < 1) fail("num_layers must be at least 1");
  if (mtp_num_layers < 0) fail("mtp_num_layers must be at least 0");
  const long num_stages = static_cast<long>(pipeline_size) * virtual_size;
  if (num_layers % num_stages != 0) {
    fail(
        fmt::format("num_layers must be a multiple of P·V = {} to split evenly; give a layout "
                    "string instead",
                    num_stages));
  }
  const long length = num_stages + num_layers + mtp_num_layers + 1;
  if (length > internal::kMaxExpandedLength) {
    fail(fmt::format("the equivalent layout string would exceed {} characters",
                     internal::kMaxExpandedLength));
  }
  const std::string per_stage(static_cast<size_t>(num_layers / num_stages), 't');
  std::string text = "E";
  for (long i = 0; i < num_stages; ++i) {
    if (i > 0) text += '|';
    text += per_stage;
  }
  text += std::string(static_cast<size_t>(mtp_num_layers), 'm');
  text += 'L';
  return build_layout(text, pipeline_size, num_layers, mtp_num_layers);
}

}  // namespace mtp::layout
