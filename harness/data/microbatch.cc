#include "harness/data/microbatch.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/common/error.h"

namespace mtp::data {

EdgeBatch parse_edge_batch(const std::string& name) {
  if (name == "data") return EdgeBatch::kData;
  if (name == "first_label_only") return EdgeBatch::kFirstLabelOnly;
  if (name == "last_label_only") return EdgeBatch::kLastLabelOnly;
  if (name == "first_two_labels") return EdgeBatch::kFirstTwoLabels;
  if (name == "all_masked") return EdgeBatch::kAllMasked;
  if (name == "repeated_token") return EdgeBatch::kRepeatedToken;
  throw InputError(
      fmt::format("edge batch \"{}\" is unknown (accepted: \"data\", "
                  "\"first_label_only\", \"last_label_only\", \"first_two_labels\", "
                  "\"all_masked\", "
                  "\"repeated_token\")",
                  name));
}

MicrobatchBuilder::MicrobatchBuilder(const TokenSource& source, const DataConfig& cfg,
                                     int64_t micro_batch_size, int64_t seq_length,
                                     int64_t vocab_size)
    : source_(source),
      b_(micro_batch_size),
      s_(seq_length),
      mask_token_(cfg.mask_token),
      eod_token_(cfg.eod_token),
      eod_mask_loss_(cfg.eod_mask_loss) {
  if (source.size() < s_ + 1) {
    throw InputError(fmt::format("data: {} has {} tokens, fewer than seq_length + 1 = {}",
                                 source.describe(), source.size(), s_ + 1));
  }
  if (source.min_vocab_size() > vocab_size) {
    throw InputError(fmt::format("data: {} needs vocab_size >= {}, the model has {}",
                                 source.describe(), source.min_vocab_size(), vocab_size));
  }
  for (const auto& name : cfg.edge_batches) edge_batches_.push_back(parse_edge_batch(name));
  for (double f : cfg.mask_fractions) {
    if (!(f >= 0.0 && f <= 1.0)) {
      throw InputError(fmt::format("data: mask_fractions entry {} is not in [0, 1]", f));
    }
  }
  mask_fractions_ = cfg.mask_fractions;
}

MicrobatchBuilder::MicrobatchBuilder(const TokenSource& source, int64_t micro_batch_size,
                                     int64_t seq_length, int64_t vocab_size, int64_t mask_token)
    : MicrobatchBuilder(
          source,
          [mask_token] {
            DataConfig cfg;
            cfg.mask_token = mask_token;
            return cfg;
          }(),
          micro_batch_size, seq_length, vocab_size) {}

void MicrobatchBuilder::read_sample(int64_t j, int32_t* out) const {
  const int64_t size = source_.size();
  if (source_.sample_order() == SampleOrder::kWindows) {
    source_.read((j * s_) % (size - s_), s_ + 1, out);
    return;
  }
  // kEpochs: stream position j·s, wrapping at the end of each epoch.
  int64_t pos = (j % size) * (s_ % size) % size;
  for (int64_t done = 0; done < s_ + 1;) {
    const int64_t n = std::min(s_ + 1 - done, size - pos);
    source_.read(pos, n, out + done);
    done += n;
    pos = 0;
  }
}

void MicrobatchBuilder::apply_edge_batch(EdgeBatch edge, Microbatch& mb) const {
  for (int64_t row = 0; row < b_; ++row) {
    const auto at = [&](int64_t i) { return static_cast<size_t>(row * s_ + i); };
    switch (edge) {
      case EdgeBatch::kData:
        break;
      case EdgeBatch::kFirstLabelOnly:
      case EdgeBatch::kLastLabelOnly:
      case EdgeBatch::kFirstTwoLabels:
      case EdgeBatch::kAllMasked:
        std::fill_n(mb.loss_mask.begin() + at(0), s_, uint8_t{0});
        if (edge == EdgeBatch::kFirstLabelOnly) mb.loss_mask[at(0)] = 1;
        if (edge == EdgeBatch::kLastLabelOnly) mb.loss_mask[at(s_ - 1)] = 1;
        if (edge == EdgeBatch::kFirstTwoLabels) {
          mb.loss_mask[at(0)] = 1;
          mb.loss_mask[at(1)] = 1;
        }
        break;
      case EdgeBatch::kRepeatedToken: {
        const int32_t t = mb.tokens[at(0)];
        std::fill_n(mb.tokens.begin() + at(0), s_, t);
        std::fill_n(mb.labels.begin() + at(0), s_, t);
        std::fill_n(mb.loss_mask.begin() + at(0), s_, uint8_t{1});
        break;
      }
    }
  }
}

namespace {

/// A number in [0, 1) from (step, global microbatch, element): SplitMix64's finaliser over the
/// three, the top 53 bits as a fraction. The same on every machine.
double unit_hash(int64_t step, int64_t g, int64_t element) {
  uint64_t x = static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull ^
               static_cast<uint64_t>(g) * 0xBF58476D1CE4E5B9ull ^
               static_cast<uint64_t>(element) * 0x94D049BB133111EBull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

}  // namespace

Microbatch MicrobatchBuilder::build(int64_t step, int64_t microbatch,
                                    int64_t num_microbatches) const {
  MTP_INTERNAL_ASSERT(step >= 1 && microbatch >= 0 && microbatch < num_microbatches,
                      "bad step/microbatch");
  Microbatch mb;
  mb.tokens.resize(b_ * s_);
  mb.labels.resize(b_ * s_);
  mb.loss_mask.resize(b_ * s_);
  mb.position_ids.resize(b_ * s_);
  std::vector<int32_t> sample(s_ + 1);
  const int64_t g = (step - 1) * num_microbatches + microbatch;
  for (int64_t row = 0; row < b_; ++row) {
    read_sample(g * b_ + row, sample.data());
    for (int64_t i = 0; i < s_; ++i) {
      const int64_t k = row * s_ + i;
      mb.tokens[k] = sample[i];
      mb.labels[k] = sample[i + 1];
      const bool masked =
          sample[i + 1] == mask_token_ || (eod_mask_loss_ && sample[i] == eod_token_);
      mb.loss_mask[k] = masked ? 0 : 1;
      mb.position_ids[k] = static_cast<int32_t>(i);
    }
  }
  if (!mask_fractions_.empty()) {
    const double f = mask_fractions_[static_cast<size_t>(microbatch) % mask_fractions_.size()];
    for (int64_t k = 0; k < b_ * s_; ++k) {
      if (mb.loss_mask[k] != 0 && unit_hash(step, g, k) < f) mb.loss_mask[k] = 0;
    }
  }
  if (!edge_batches_.empty()) {
    apply_edge_batch(edge_batches_[static_cast<size_t>(g) % edge_batches_.size()], mb);
  }
  return mb;
}

}  // namespace mtp::data
