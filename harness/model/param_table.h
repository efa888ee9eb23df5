// File: harness/model/param_table.h
//
// The parameters one model chunk holds, by global name, in insertion (canonical) order.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mtp::model {

/// Name → leaf tensor (requires_grad) of one model chunk. Copies of a shared parameter (the
/// word-embedding table on the first and the MTP stage) appear in several chunks' tables under
/// the same global name; the engine sums their main grads across the embedding group.
class ParamTable {
 public:
  /// Adds `t` under `name`. Throws InternalError if the name is already present.
  void add(const std::string& name, at::Tensor t);
  /// The tensor under `name`. Throws InternalError when absent (a bug in chunk building).
  const at::Tensor& get(const std::string& name) const;
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const std::vector<std::pair<std::string, at::Tensor>>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<std::pair<std::string, at::Tensor>> entries_;
  std::map<std::string, size_t> index_;
};

}  // namespace mtp::model
