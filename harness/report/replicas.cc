#include "harness/report/replicas.h"

#include <fmt/format.h>

#include <chrono>

#include "harness/common/glob.h"
#include "harness/compare/tensor_compare.h"
#include "harness/record/record.h"

namespace mtp::report {
namespace {

using record::Group;

/// The recorded copy's group at `step`: the model's own weights (model_weight, bf16 runs) when
/// the step has them, else weight.
std::string owner_group(const record::RecordReader& rec, int step) {
  return record::group_name(rec.has_group(step, Group::kModelWeight) ? Group::kModelWeight
                                                                     : Group::kWeight);
}

/// Compares copy `name` at `step` with its recorded copy into `d` (bitwise).
void compare_copy(const record::RecordReader& rec, int step, const std::string& name,
                  const compare::CompareClass& cls, compare::TensorDiff& d) {
  const std::string copies = record::group_name(Group::kCopies);
  const std::string param = record::copied_param(name);
  const std::string group = owner_group(rec, step);
  const auto owner_names = rec.names(step, group);
  if (param.empty() ||
      std::find(owner_names.begin(), owner_names.end(), param) == owner_names.end()) {
    d.structural =
        fmt::format("no recorded tensor {}/{} for this copy", group, param.empty() ? name : param);
    return;
  }
  const record::TensorInfo& a = rec.info(step, copies, name);
  const record::TensorInfo& b = rec.info(step, group, param);
  d.numel = a.numel();
  if (a.dtype != b.dtype || a.shape != b.shape) {
    d.structural = fmt::format("dtype or shape differs from the recorded {}/{}", group, param);
    return;
  }
  if (!a.stored || !b.stored) {  // digests decide: equal, or which block differs
    d.by_digest = true;
    const record::TensorDigest da = rec.block_digests(step, copies, name);
    const record::TensorDigest db = rec.block_digests(step, group, param);
    d.blocks = static_cast<int64_t>(db.blocks.size());
    d.differing_blocks = da.differing_blocks(db);
    if (const auto first = da.first_differing_block(db)) {
      d.first_block = *first;
      d.first_block_coord = compare::unflatten(*first * da.block_elements, a.shape);
      d.mismatches = 1;  // a bitwise class needs no values to fail
    }
    return;
  }
  compare::compare_values(rec.read(step, copies, name), rec.read(step, group, param), cls, d);
}

}  // namespace

ExpectationResult evaluate_replicas(const scenario::Expectation& e,
                                    const std::map<std::string, std::string>& record_paths) {
  ExpectationResult out;
  out.expectation = &e;
  out.holds = true;
  const std::string copies = record::group_name(Group::kCopies);
  for (const std::string& variant : e.variants) {
    const auto t0 = std::chrono::steady_clock::now();
    const record::RecordReader rec(record_paths.at(variant));
    PairResult p;
    p.baseline = variant;
    p.other = copies;
    compare::CompareResult& r = p.result;
    r.cls = e.cls;
    for (int step : rec.steps()) {
      if (!e.selection.steps.empty() && !e.selection.steps.count(step)) continue;
      if (!rec.has_group(step, Group::kCopies)) {
        compare::TensorDiff d;
        d.step = step;
        d.group = copies;
        d.structural =
            "the step holds no copies group (record the run with [training] "
            "record_copies = true)";
        r.structural.push_back(fmt::format("step {}: no copies group", step));
        if (!r.first_divergence) r.first_divergence = d;
        continue;
      }
      for (const std::string& name : rec.names(step, copies)) {
        const std::string param = record::copied_param(name);
        if (!glob_match_any(e.selection.include, param) ||
            glob_match_any(e.selection.exclude, param)) {
          continue;
        }
        compare::TensorDiff d;
        d.step = step;
        d.group = copies;
        d.name = name;
        compare_copy(rec, step, name, r.cls, d);
        if (d.structural.empty()) ++r.tensors_compared;
        if (d.by_digest) ++r.tensors_by_digest;
        if (d.failed() && !r.first_divergence) r.first_divergence = d;
        r.tensors.push_back(std::move(d));
      }
    }
    r.equal = r.structural.empty() &&
              std::none_of(r.tensors.begin(), r.tensors.end(),
                           [](const compare::TensorDiff& d) { return d.failed(); });
    if (r.tensors_compared == 0 && r.structural.empty()) {
      // Nothing to compare is not a pass: the variant has one copy of everything.
      r.equal = false;
      p.note =
          "the record holds no parameter copy to check (one rank, one copy of each "
          "parameter): list only variants with copies";
    }
    p.holds = r.equal;
    if (!e.allow_nonfinite) {
      if (const auto nf = rec.first_nonfinite()) {
        p.nonfinite = variant + ": " + nf->describe();
        p.holds = false;
      }
    }
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.holds = out.holds && p.holds;
    out.pairs.push_back(std::move(p));
  }
  return out;
}

}  // namespace mtp::report
