// compare_records: walks both records in canonical order (steps ascending; groups batch, loss,
// grad, weight; names in A's creation order, then names only in B), checks structure, then
// compares the values of every tensor present in both (compare.h).

#include "harness/compare/compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <unordered_set>

#include "harness/common/glob.h"
#include "harness/compare/tensor_compare.h"

namespace mtp::compare {
namespace {

using record::RecordReader;
using record::TensorData;

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

/// The selected groups in canonical order; InputError for an unknown group.
std::vector<std::string> selected_groups(const Selection& sel) {
  const std::vector<std::string>& all = record::record_groups();
  for (const std::string& g : sel.groups) {
    if (std::find(all.begin(), all.end(), g) == all.end()) {
      throw InputError(
          fmt::format("unknown group '{}' in the comparison selection (expected "
                      "some of: {})",
                      g, fmt::join(all, ", ")));
    }
  }
  std::vector<std::string> out;
  for (const std::string& g : all) {
    if (std::find(sel.groups.begin(), sel.groups.end(), g) != sel.groups.end()) {
      out.push_back(g);
    }
  }
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

/// One comparison in progress: the readers, the class, the selection and the result so far.
class Walk {
 public:
  Walk(const RecordReader& a, const RecordReader& b, const CompareClass& cls, const Selection& sel,
       const CompareOptions& options)
      : a_(a), b_(b), cls_(cls), sel_(sel), options_(options), groups_(selected_groups(sel)) {
    result_.cls = cls;
  }

  CompareResult run();

 private:
  /// Selected names of `group` in `step` of `r` (empty when the step or group is absent).
  std::vector<std::string> selected_names(const RecordReader& r, int step,
                                          const std::string& group) const;
  /// Number of selected tensors in `step` of `r`.
  size_t selected_count(const RecordReader& r, int step) const;
  void step_or_group_difference(int step, const std::string& group, const std::string& why);
  void add(TensorDiff d);
  void compare_group(int step, const std::string& group);
  void compare_tensor(int step, const std::string& group, const std::string& name);
  /// Values of a tensor both records hold, chunk by chunk, both files read concurrently.
  void compare_stored(int step, const std::string& group, const std::string& name,
                      const record::TensorInfo& info, TensorDiff& d);
  /// A tensor one record keeps only as digests: the first differing block, or why it cannot be
  /// compared.
  void compare_digests(int step, const std::string& group, const std::string& name,
                       const record::TensorInfo& ia, const record::TensorInfo& ib, TensorDiff& d);

  const RecordReader& a_;
  const RecordReader& b_;
  const CompareClass& cls_;
  const Selection& sel_;
  const CompareOptions& options_;
  std::vector<std::string> groups_;
  CompareResult result_;
};

std::vector<std::string> Walk::selected_names(const RecordReader& r, int step,
                                              const std::string& group) const {
  std::vector<int> steps = r.steps();
  if (!std::binary_search(steps.begin(), steps.end(), step) || !contains(r.groups(step), group)) {
    return {};
  }
  std::vector<std::string> out;
  for (const std::string& name : r.names(step, group)) {
    if (glob_match_any(sel_.include, name) && !glob_match_any(sel_.exclude, name)) {
      out.push_back(name);
    }
  }
  return out;
}

size_t Walk::selected_count(const RecordReader& r, int step) const {
  size_t n = 0;
  for (const std::string& g : groups_) {
    n += selected_names(r, step, g).size();
  }
  return n;
}

void Walk::step_or_group_difference(int step, const std::string& group, const std::string& why) {
  TensorDiff d;
  d.step = step;
  d.group = group;
  d.structural = why;
  result_.structural.push_back(d.describe());
  if (!result_.first_divergence) {
    result_.first_divergence = d;
  }
}

void Walk::add(TensorDiff d) {
  if (d.failed() && !result_.first_divergence) {
    result_.first_divergence = d;
  }
  result_.tensors.push_back(std::move(d));
}

void Walk::compare_tensor(int step, const std::string& group, const std::string& name) {
  TensorDiff d;
  d.step = step;
  d.group = group;
  d.name = name;
  // Opened and checked against the index: a verdict may rest on the stored digests alone.
  const record::TensorInfo& ia = a_.verified_info(step, group, name);
  const record::TensorInfo& ib = b_.verified_info(step, group, name);
  d.numel = ia.numel();
  std::vector<std::string> problems;
  if (ia.dtype != ib.dtype) {
    problems.push_back(fmt::format("dtype {} in A, {} in B", record::dtype_name(ia.dtype),
                                   record::dtype_name(ib.dtype)));
  }
  if (ia.shape != ib.shape) {
    problems.push_back(
        fmt::format("shape {} in A, {} in B", shape_string(ia.shape), shape_string(ib.shape)));
  }
  if (!problems.empty()) {
    d.structural = fmt::format("{}", fmt::join(problems, "; "));
    add(std::move(d));
    return;
  }
  if (ia.digest && ib.digest && *ia.digest == *ib.digest &&
      !(options_.ignore_digests && ia.stored && ib.stored)) {
    d.by_digest = true;  // equal bytes: equal under every class, nothing to read
    ++result_.tensors_by_digest;
  } else if (ia.stored && ib.stored) {
    compare_stored(step, group, name, ia, d);
  } else {
    compare_digests(step, group, name, ia, ib, d);
    if (!d.structural.empty()) {
      add(std::move(d));
      return;
    }
    ++result_.tensors_by_digest;
    if (d.undecided) ++result_.tensors_undecided;
  }
  ++result_.tensors_compared;
  add(std::move(d));
}

namespace {

/// Adds chunk result `part` (a later chunk) into `d`.
void merge_chunk(const TensorDiff& part, TensorDiff& d) {
  d.mismatches += part.mismatches;
  d.bit_mismatches += part.bit_mismatches;
  d.max_ulp = std::max(d.max_ulp, part.max_ulp);
  d.max_abs = std::max(d.max_abs, part.max_abs);
  d.max_rel = std::max(d.max_rel, part.max_rel);
  d.max_limit_fraction = std::max(d.max_limit_fraction, part.max_limit_fraction);
  d.sum_sq_diff += part.sum_sq_diff;
  d.sum_sq_b += part.sum_sq_b;
  d.nonfinite_diff = d.nonfinite_diff || part.nonfinite_diff;
  if (d.first_index < 0 && part.first_index >= 0) {
    d.first_index = part.first_index;
    d.a_value = part.a_value;
    d.b_value = part.b_value;
    d.a_bits = part.a_bits;
    d.b_bits = part.b_bits;
  }
}

/// Threads comparing the chunks of one tensor.
size_t compare_threads(size_t chunks) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return std::min<size_t>(chunks, std::min(4u, hw));
}

}  // namespace

void Walk::compare_stored(int step, const std::string& group, const std::string& name,
                          const record::TensorInfo& info, TensorDiff& d) {
  const size_t esize = static_cast<size_t>(record::dtype_size(info.dtype));
  const uint64_t total = static_cast<uint64_t>(info.numel()) * esize;
  if (total == 0) return;
  const size_t chunk = std::min<uint64_t>(total, kChunkBytes / esize * esize);
  const size_t chunks = static_cast<size_t>((total + chunk - 1) / chunk);
  const auto ma = a_.mapped_bytes(step, group, name);
  const auto mb = b_.mapped_bytes(step, group, name);
  // Each chunk's result in its own slot, merged in chunk order: the same result for any thread
  // count. Both files are read by the comparing threads themselves, in place (memory maps: no
  // copy) or, for files HDF5 lays out otherwise, into per-thread buffers.
  std::vector<TensorDiff> parts(chunks);
  auto work = [&](size_t first, size_t stride) {
    std::vector<uint8_t> buf_a, buf_b;
    for (size_t c = first; c < chunks; c += stride) {
      const uint64_t offset = c * chunk;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, total - offset));
      const uint8_t* pa;
      const uint8_t* pb;
      if (ma) {
        pa = ma->first + offset;
      } else {
        buf_a.resize(chunk);
        a_.read_bytes(step, group, name, offset, n, buf_a.data());
        pa = buf_a.data();
      }
      if (mb) {
        pb = mb->first + offset;
      } else {
        buf_b.resize(chunk);
        b_.read_bytes(step, group, name, offset, n, buf_b.data());
        pb = buf_b.data();
      }
      compare_chunk(pa, pb, static_cast<int64_t>(offset / esize), static_cast<int64_t>(n / esize),
                    info.dtype, cls_, parts[c]);
    }
  };
  const size_t threads = compare_threads(chunks);
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        work(t, threads);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  try {
    work(0, threads);
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (auto& th : pool) th.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (const TensorDiff& part : parts) merge_chunk(part, d);
  finish_values(cls_, info.dtype, d);
  if (d.first_index >= 0) d.first_coord = unflatten(d.first_index, info.shape);
}

void Walk::compare_digests(int step, const std::string& group, const std::string& name,
                           const record::TensorInfo& ia, const record::TensorInfo& ib,
                           TensorDiff& d) {
  // A record without digests (schema version 1, or Megatron-LM's own, ci/megatron_recorder)
  // holds the values, whose digests are computed here: the same XXH3-128 blocks the writer
  // makes, so equal digests still mean equal bits.
  auto digests = [&](const record::RecordReader& r, const record::TensorInfo& i) {
    if (i.digest) return r.block_digests(step, group, name);
    const record::TensorData t = r.read(step, group, name);
    return record::digest_bytes(t.bytes.data(), t.bytes.size(), record::dtype_size(t.dtype));
  };
  if ((!ia.digest && !ia.stored) || (!ib.digest && !ib.stored)) {
    d.structural = fmt::format("{} holds neither values nor digests: cannot be compared",
                               !ia.digest && !ia.stored ? "A" : "B");
    return;
  }
  const record::TensorDigest da = digests(a_, ia);
  const record::TensorDigest db = digests(b_, ib);
  d.by_digest = true;
  if (!da.first_differing_block(db)) return;  // equal bytes (a digest computed from values)
  d.blocks = static_cast<int64_t>(da.blocks.size());
  d.differing_blocks = da.differing_blocks(db);
  d.first_block = da.first_differing_block(db).value_or(0);
  d.first_block_coord = unflatten(d.first_block * record::kDigestBlockElements, ia.shape);
  // Differing digests prove a bit difference: that decides bitwise and differ, but not a class
  // that allows some difference.
  d.undecided = cls_.needs_values();
}

void Walk::compare_group(int step, const std::string& group) {
  std::vector<std::string> in_a = selected_names(a_, step, group);
  std::vector<std::string> in_b = selected_names(b_, step, group);
  bool group_a = contains(a_.groups(step), group);
  bool group_b = contains(b_.groups(step), group);
  if (group_a != group_b) {
    // Structure is every step, group and tensor: a group in one record only is a difference,
    // even when it is empty or holds no selected tensor.
    const std::vector<std::string>& names = group_a ? in_a : in_b;
    step_or_group_difference(
        step, group,
        fmt::format("group only in {} ({} selected tensors)", group_a ? "A" : "B", names.size()));
    return;
  }
  std::unordered_set<std::string> set_a(in_a.begin(), in_a.end());
  std::unordered_set<std::string> set_b(in_b.begin(), in_b.end());
  for (const std::string& name : in_a) {
    if (set_b.count(name) == 0) {
      TensorDiff d;
      d.step = step;
      d.group = group;
      d.name = name;
      d.numel = a_.describe(step, group, name).numel();
      d.structural = "only in A";
      add(std::move(d));
    } else {
      compare_tensor(step, group, name);
    }
  }
  for (const std::string& name : in_b) {
    if (set_a.count(name) == 0) {
      TensorDiff d;
      d.step = step;
      d.group = group;
      d.name = name;
      d.numel = b_.describe(step, group, name).numel();
      d.structural = "only in B";
      add(std::move(d));
    }
  }
}

CompareResult Walk::run() {
  std::vector<int> steps_a = a_.steps();
  std::vector<int> steps_b = b_.steps();
  std::set<int> steps = sel_.steps;
  if (steps.empty()) {
    steps.insert(steps_a.begin(), steps_a.end());
    steps.insert(steps_b.begin(), steps_b.end());
  }
  for (int step : steps) {
    bool in_a = std::binary_search(steps_a.begin(), steps_a.end(), step);
    bool in_b = std::binary_search(steps_b.begin(), steps_b.end(), step);
    if (!in_a && !in_b) {
      step_or_group_difference(step, "", "selected step is in neither record");
      continue;
    }
    if (in_a != in_b) {
      // A step in one record only is a difference, even when empty (structure, not values).
      size_t n = selected_count(in_a ? a_ : b_, step);
      step_or_group_difference(
          step, "", fmt::format("step only in {} ({} selected tensors)", in_a ? "A" : "B", n));
      continue;
    }
    for (const std::string& group : groups_) {
      compare_group(step, group);
    }
  }
  if (result_.tensors.empty() && result_.structural.empty()) {
    throw InputError(fmt::format(
        "nothing to compare: the selection (groups {}; include {}; exclude {}; steps {}) matches "
        "no tensor in {} or {}",
        fmt::join(groups_, ","), fmt::join(sel_.include, ","),
        sel_.exclude.empty() ? "none" : fmt::format("{}", fmt::join(sel_.exclude, ",")),
        sel_.steps.empty() ? "all" : fmt::format("{}", fmt::join(sel_.steps, ",")), a_.path(),
        b_.path()));
  }
  result_.equal = result_.structural.empty() && result_.tensors_undecided == 0 &&
                  std::none_of(result_.tensors.begin(), result_.tensors.end(),
                               [](const TensorDiff& d) { return d.failed(); });
  return std::move(result_);
}

}  // namespace

CompareResult compare_records(const RecordReader& a, const RecordReader& b, const CompareClass& cls,
                              const Selection& sel) {
  const CompareOptions options;
  return Walk(a, b, cls, sel, options).run();
}

CompareResult compare_records_with(const RecordReader& a, const RecordReader& b,
                                   const CompareClass& cls, const Selection& sel,
                                   const CompareOptions& options) {
  return Walk(a, b, cls, sel, options).run();
}

}  // namespace mtp::compare
