#include "harness/model/param_table.h"

#include "harness/common/error.h"

namespace mtp::model {

void ParamTable::add(const std::string& name, at::Tensor t) {
  MTP_INTERNAL_ASSERT(!has(name), "parameter added twice: " + name);
  index_[name] = entries_.size();
  entries_.emplace_back(name, std::move(t));
}

const at::Tensor& ParamTable::get(const std::string& name) const {
  auto it = index_.find(name);
  MTP_INTERNAL_ASSERT(it != index_.end(), "chunk has no parameter " + name);
  return entries_[it->second].second;
}

}  // namespace mtp::model
