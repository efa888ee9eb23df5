#include "harness/engine/weights_import.h"

#include <fmt/format.h>

#include <cstring>

#include "harness/common/error.h"
#include "harness/model/params.h"
#include "harness/record/named_tensors.h"

namespace mtp::engine {

at::Tensor tensor_from_record(const record::TensorData& t) {
  at::ScalarType type = at::kFloat;
  switch (t.dtype) {
    case record::DType::kF32:
      type = at::kFloat;
      break;
    case record::DType::kF64:
      type = at::kDouble;
      break;
    case record::DType::kBF16:
      type = at::kBFloat16;
      break;
    case record::DType::kF16:
      type = at::kHalf;
      break;
    case record::DType::kI32:
      type = at::kInt;
      break;
    case record::DType::kI64:
      type = at::kLong;
      break;
    case record::DType::kU8:
      type = at::kByte;
      break;
  }
  at::Tensor out = at::empty(t.shape, at::TensorOptions().dtype(type));
  MTP_INTERNAL_ASSERT(
      static_cast<size_t>(out.nbytes()) == t.bytes.size(),
      fmt::format("{}: {} bytes for {} elements", t.name, t.bytes.size(), t.numel()));
  if (!t.bytes.empty()) std::memcpy(out.data_ptr(), t.bytes.data(), t.bytes.size());
  return out;
}

InitialWeights initial_weights_from_record(const record::RecordReader& rec, int step,
                                           const config::ModelConfig& cfg) {
  InitialWeights w;
  w.specs = config::parameter_specs(cfg);
  std::vector<record::ExpectedTensor> expected;
  for (const auto& s : w.specs) expected.push_back({s.name, s.shape});
  for (const auto& t : record::read_named_tensors(rec, step, record::Group::kWeight, expected)) {
    w.values.push_back(tensor_from_record(t).to(at::kDouble));
  }
  return w;
}

}  // namespace mtp::engine
