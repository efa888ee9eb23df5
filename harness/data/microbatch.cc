#include "harness/data/microbatch.h"

#include <fmt/format.h>

#include "harness/common/error.h"

namespace mtp::data {

MicrobatchBuilder::MicrobatchBuilder(const TokenSource& source, int64_t micro_batch_size,
                                     int64_t seq_length, int64_t vocab_size, int64_t mask_token)
    : source_(source), b_(micro_batch_size), s_(seq_length), mask_token_(mask_token) {
  if (source.size() < s_ + 1) {
    throw InputError(fmt::format("data: {} has {} tokens, fewer than seq_length + 1 = {}",
                                 source.describe(), source.size(), s_ + 1));
  }
  if (source.min_vocab_size() > vocab_size) {
    throw InputError(fmt::format("data: {} needs vocab_size >= {}, the model has {}",
                                 source.describe(), source.min_vocab_size(), vocab_size));
  }
}

Microbatch MicrobatchBuilder::build(int64_t step, int64_t microbatch,
                                    int64_t num_microbatches) const {
  MTP_INTERNAL_ASSERT(step >= 1 && microbatch >= 0 && microbatch < num_microbatches,
                      "bad step/microbatch");
  Microbatch mb;
  mb.tokens.resize(b_ * s_);
  mb.labels.resize(b_ * s_);
  mb.loss_mask.resize(b_ * s_);
  std::vector<int32_t> window(s_ + 1);
  const int64_t span = source_.size() - s_;
  for (int64_t row = 0; row < b_; ++row) {
    const int64_t j = ((step - 1) * num_microbatches + microbatch) * b_ + row;
    const int64_t start = (j * s_) % span;
    source_.read(start, s_ + 1, window.data());
    for (int64_t i = 0; i < s_; ++i) {
      mb.tokens[row * s_ + i] = window[i];
      mb.labels[row * s_ + i] = window[i + 1];
      mb.loss_mask[row * s_ + i] = window[i + 1] == mask_token_ ? 0 : 1;
    }
  }
  return mb;
}

}  // namespace mtp::data
