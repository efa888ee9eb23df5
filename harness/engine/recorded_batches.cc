#include "harness/engine/recorded_batches.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "harness/common/error.h"
#include "harness/data/token_source.h"
#include "harness/engine/weights_import.h"

namespace mtp::engine {
namespace {

/// /steps/<step>/batch/<name> of `rec` as a CPU tensor of shape [K, b, s]; RecordError otherwise.
at::Tensor read_batch_tensor(const record::RecordReader& rec, int64_t step, const std::string& name,
                             const std::vector<int64_t>& shape) {
  const std::string where =
      fmt::format("{}: steps/{}/{}/{}", rec.path(), record::step_group_name(static_cast<int>(step)),
                  record::group_name(record::Group::kBatch), name);
  const std::vector<std::string> names = rec.names(static_cast<int>(step), record::Group::kBatch);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw record::RecordError(
        fmt::format("{}: missing (a replayed step needs tokens, labels and "
                    "loss_mask)",
                    where));
  }
  const at::Tensor t =
      tensor_from_record(rec.read(static_cast<int>(step), record::Group::kBatch, name));
  if (t.sizes().vec() != shape) {
    throw record::RecordError(
        fmt::format("{}: shape [{}], expected [{}] (K = DP·M microbatches "
                    "of [micro_batch_size, seq_length])",
                    where, fmt::join(t.sizes().vec(), ", "), fmt::join(shape, ", ")));
  }
  return t;
}

/// Token ids as int32, checked in [0, vocab_size).
std::vector<int32_t> token_ids(const record::RecordReader& rec, int64_t step,
                               const std::string& name, const std::vector<int64_t>& shape,
                               int64_t vocab_size) {
  const at::Tensor t = read_batch_tensor(rec, step, name, shape);
  const std::string where = fmt::format("{}: steps/{}/batch/{}", rec.path(),
                                        record::step_group_name(static_cast<int>(step)), name);
  if (!at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
    throw record::RecordError(fmt::format("{}: dtype {} is not an integer type", where,
                                          std::string(c10::toString(t.scalar_type()))));
  }
  const at::Tensor l = t.to(at::kLong);
  const int64_t lo = l.min().item<int64_t>(), hi = l.max().item<int64_t>();
  if (lo < 0 || hi >= vocab_size) {
    throw record::RecordError(
        fmt::format("{}: token ids span [{}, {}], outside [0, vocab_size = "
                    "{})",
                    where, lo, hi, vocab_size));
  }
  const at::Tensor i = l.to(at::kInt).contiguous();
  std::vector<int32_t> out(static_cast<size_t>(i.numel()));
  std::memcpy(out.data(), i.data_ptr(), out.size() * sizeof(int32_t));
  return out;
}

/// The loss mask as uint8, checked to hold only 0 and 1.
std::vector<uint8_t> mask_bits(const record::RecordReader& rec, int64_t step,
                               const std::vector<int64_t>& shape) {
  const at::Tensor t = read_batch_tensor(rec, step, record::kBatchTensorNames[2], shape);
  const at::Tensor d = t.to(at::kDouble);
  if (!((d == 0) | (d == 1)).all().item<bool>()) {
    throw record::RecordError(
        fmt::format("{}: steps/{}/batch/loss_mask: holds values other than "
                    "0 and 1",
                    rec.path(), record::step_group_name(static_cast<int>(step))));
  }
  const at::Tensor u = d.to(at::kByte).contiguous();
  std::vector<uint8_t> out(static_cast<size_t>(u.numel()));
  std::memcpy(out.data(), u.data_ptr(), out.size());
  return out;
}

}  // namespace

RecordedBatches::RecordedBatches(const record::RecordReader& rec, int64_t first, int64_t last,
                                 int64_t K, int64_t micro_batch_size, int64_t seq_length,
                                 int64_t vocab_size)
    : path_(rec.path()),
      sha256_(data::sha256_file(rec.path(), "record")),
      first_(first),
      last_(last),
      K_(K),
      b_(micro_batch_size),
      s_(seq_length) {
  const std::vector<int64_t> shape{K_, b_, s_};
  const std::vector<int> present = rec.steps();
  for (int64_t step = first_; step <= last_; ++step) {
    if (!std::binary_search(present.begin(), present.end(), static_cast<int>(step))) {
      throw record::RecordError(fmt::format("{}: has no step {} to replay (its steps: {})", path_,
                                            step, fmt::join(present, " ")));
    }
    Step s;
    s.tokens = token_ids(rec, step, record::kBatchTensorNames[0], shape, vocab_size);
    s.labels = token_ids(rec, step, record::kBatchTensorNames[1], shape, vocab_size);
    s.loss_mask = mask_bits(rec, step, shape);
    steps_.emplace(step, std::move(s));
  }
}

data::Microbatch RecordedBatches::build(int64_t step, int64_t microbatch,
                                        int64_t num_microbatches) const {
  const auto it = steps_.find(step);
  if (it == steps_.end()) {
    throw InputError(fmt::format("record {}: step {} was not read (steps {}-{} are replayed)",
                                 path_, step, first_, last_));
  }
  if (num_microbatches != K_) {
    throw InputError(
        fmt::format("record {}: the run asks for {} microbatches per step, the "
                    "record holds {} (DP·M must stay the recorded global batch)",
                    path_, num_microbatches, K_));
  }
  MTP_INTERNAL_ASSERT(microbatch >= 0 && microbatch < K_, "microbatch out of range");
  const size_t n = static_cast<size_t>(b_ * s_), off = static_cast<size_t>(microbatch) * n;
  const Step& s = it->second;
  data::Microbatch mb;
  mb.tokens.assign(s.tokens.begin() + off, s.tokens.begin() + off + n);
  mb.labels.assign(s.labels.begin() + off, s.labels.begin() + off + n);
  mb.loss_mask.assign(s.loss_mask.begin() + off, s.loss_mask.begin() + off + n);
  mb.position_ids.resize(n);
  for (size_t k = 0; k < n; ++k) mb.position_ids[k] = static_cast<int32_t>(k % s_);
  return mb;
}

std::string RecordedBatches::describe() const {
  return fmt::format("record:{} steps {}-{} ({} microbatches of [{}, {}])", path_, first_, last_,
                     K_, b_, s_);
}

}  // namespace mtp::engine
