#include "harness/record/named_tensors.h"

#include <fmt/format.h>

#include <set>

namespace mtp::record {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace

std::vector<TensorData> read_named_tensors(const RecordReader& rec, int step, Group group,
                                           const std::vector<ExpectedTensor>& expected) {
  const std::string where =
      fmt::format("{}: steps/{}/{}", rec.path(), step_group_name(step), group_name(group));
  const std::vector<std::string> present = rec.names(step, group);  // RecordError when absent
  const std::set<std::string> have(present.begin(), present.end());
  std::set<std::string> want;
  std::vector<std::string> missing;
  for (const auto& e : expected) {
    want.insert(e.name);
    if (!have.count(e.name)) missing.push_back(e.name);
  }
  if (!missing.empty()) {
    throw RecordError(fmt::format(
        "{}: parameter {} is missing ({} of {} expected names absent: "
        "{})",
        where, missing.front(), missing.size(), expected.size(), fmt::join(missing, ", ")));
  }
  for (const auto& name : present) {
    if (!want.count(name)) {
      throw RecordError(
          fmt::format("{}/{}: extra tensor: not a parameter of this model (its "
                      "{} parameters are named as Megatron-LM names them)",
                      where, name, expected.size()));
    }
  }
  std::vector<TensorData> out;
  for (const auto& e : expected) {
    const TensorData d = rec.describe(step, group, e.name);
    if (d.shape != e.shape) {
      throw RecordError(
          fmt::format("{}/{}: shape {} in the record, the model's parameter has "
                      "shape {}",
                      where, e.name, shape_text(d.shape), shape_text(e.shape)));
    }
    if (!dtype_is_float(d.dtype)) {
      throw RecordError(fmt::format("{}/{}: dtype {}, but a weight must be floating point", where,
                                    e.name, dtype_name(d.dtype)));
    }
    out.push_back(rec.read(step, group, e.name));
  }
  return out;
}

}  // namespace mtp::record
