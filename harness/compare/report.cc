// TensorDiff::describe and format_report: the human-readable side of a comparison (compare.h).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

#include "harness/compare/compare.h"

namespace mtp::compare {
namespace {

/// "step 1", "step 1 grad" or "step 1 grad/name".
std::string location(const TensorDiff& d) {
  if (d.group.empty()) {
    return fmt::format("step {}", d.step);
  }
  if (d.name.empty()) {
    return fmt::format("step {} {}", d.step, d.group);
  }
  return fmt::format("step {} {}/{}", d.step, d.group, d.name);
}

std::string ulp_string(uint64_t ulp) {
  return ulp == std::numeric_limits<uint64_t>::max() ? "NaN" : fmt::format("{}", ulp);
}

/// One table row's tensor column: "grad/name".
std::string tensor_column(const TensorDiff& d) { return d.group + "/" + d.name; }

}  // namespace

std::string TensorDiff::describe() const {
  std::string loc = location(*this);
  if (!structural.empty()) {
    return fmt::format("{}: {}", loc, structural);
  }
  if (first_block >= 0) {
    return fmt::format(
        "{}: digests differ in {} of {} blocks of {} elements, first in block {} "
        "(from element [{}], flat {}); the values are not in the record (compare "
        "--localize re-runs both variants to find the element)",
        loc, differing_blocks, blocks, record::kDigestBlockElements, first_block,
        fmt::join(first_block_coord, ", "), first_block * record::kDigestBlockElements);
  }
  if (first_index < 0) {
    if (bit_mismatches == 0) {
      return fmt::format("{}: bitwise equal", loc);
    }
    if (rel_l2 > 0.0) {
      return fmt::format(
          "{}: {} of {} elements differ in bits; relative L2 {:.3g}, within the class", loc,
          bit_mismatches, numel, rel_l2);
    }
    return fmt::format("{}: {} of {} elements differ in bits, all within the class (max ULP {})",
                       loc, bit_mismatches, numel, ulp_string(max_ulp));
  }
  std::string index = first_coord.empty() ? "" : fmt::format("[{}]", fmt::join(first_coord, ", "));
  // rel_l2 fails a whole tensor: say by how much, then its first differing element.
  const std::string norm =
      rel_l2 > 0.0 ? fmt::format(" (relative L2 of the tensor {:.3g})", rel_l2) : "";
  return fmt::format("{}{}: a={} ({}) b={} ({}){}", loc, index, a_value, a_bits, b_value, b_bits,
                     norm);
}

std::string verdict_text(const CompareResult& r) {
  const std::string cls = r.cls.to_string();
  const int64_t n = static_cast<int64_t>(r.tensors.size());
  int64_t failing = 0, bits = 0, differing = 0;
  uint64_t max_ulp = 0;
  double max_abs = 0.0, max_rel = 0.0, used = 0.0;
  const TensorDiff* worst_l2 = nullptr;  // rel_l2: the tensor with the largest relative L2
  for (const TensorDiff& d : r.tensors) {
    if (worst_l2 == nullptr || d.rel_l2 > worst_l2->rel_l2) worst_l2 = &d;
    failing += d.failed() ? 1 : 0;
    differing += d.bit_mismatches > 0 || d.first_block >= 0 ? 1 : 0;
    bits += d.bit_mismatches;
    max_ulp = std::max(max_ulp, d.max_ulp);
    max_abs = std::max(max_abs, d.max_abs);
    max_rel = std::max(max_rel, d.max_rel);
    used = std::max(used, d.max_limit_fraction);
  }
  const std::string first = r.first_divergence ? r.first_divergence->describe() : "";
  const bool differ = r.cls.kind == CompareClass::Kind::kDiffer;
  if (r.undecided()) {
    const TensorDiff* u = nullptr;
    for (const TensorDiff& d : r.tensors) {
      if (d.undecided && u == nullptr) u = &d;
    }
    return fmt::format(
        "UNDECIDED {}: the digests of {} of {} tensors differ and their values are "
        "not in the records, so the class cannot be applied (first {}); re-run "
        "with their steps in full (check does; compare --localize re-trains them)",
        cls, r.tensors_undecided, n,
        u ? fmt::format("step {} {}/{} block {}", u->step, u->group, u->name, u->first_block)
          : "?");
  }
  if (differ) {
    if (!r.holds()) {
      return fmt::format(
          "FAILS differ: the records are bitwise equal ({} tensors, {} of them by "
          "digest)",
          r.tensors_compared, r.tensors_by_digest);
    }
    if (!r.structural.empty()) return "differ as expected, in structure: " + r.structural.front();
    std::string s = fmt::format("differ as expected: {} of {} tensors differ in bits, first {}",
                                differing, n, first);
    if (bits > 0) {
      s += fmt::format("; {} elements differ, max |diff| {:.3g}, max ULP {}", bits, max_abs,
                       ulp_string(max_ulp));
    }
    return s;
  }
  if (!r.holds()) {
    if (!r.structural.empty()) return "FAILS " + cls + ": structure: " + r.structural.front();
    return fmt::format("FAILS {}: {} of {} tensors outside the class; first {}", cls, failing, n,
                       first);
  }
  if (r.cls.kind == CompareClass::Kind::kBitwise || bits == 0) {
    return fmt::format("bitwise equal ({} tensors, {} of them by digest)", r.tensors_compared,
                       r.tensors_by_digest);
  }
  if (r.cls.kind == CompareClass::Kind::kRelL2) {
    return fmt::format(
        "within {} ({} tensors): {} elements differ in bits, worst relative L2 {:.3g} ({}/{}), "
        "max |diff| {:.3g}; {:.3g}% of the limit used (headroom {:.3g}%)",
        cls, r.tensors_compared, bits, worst_l2->rel_l2, worst_l2->group, worst_l2->name, max_abs,
        100.0 * used, 100.0 * (1.0 - used));
  }
  return fmt::format(
      "within {} ({} tensors): {} elements differ in bits, max |diff| {:.3g}, max "
      "|diff|/|b| {:.3g}, max ULP {}; {:.3g}% of the limit used (headroom "
      "{:.3g}%)",
      cls, r.tensors_compared, bits, max_abs, max_rel, ulp_string(max_ulp), 100.0 * used,
      100.0 * (1.0 - used));
}

std::string format_report(const CompareResult& r, const std::string& a_label,
                          const std::string& b_label, int max_rows) {
  std::string out = fmt::format("{} ({}): A = {}, B = {}\n",
                                r.undecided() ? "UNDECIDED"
                                : r.equal     ? "EQUAL"
                                              : "DIFFERENT",
                                r.cls.to_string(), a_label, b_label);
  out += "verdict: " + verdict_text(r) + "\n";
  std::vector<const TensorDiff*> failing;
  for (const TensorDiff& d : r.tensors) {
    if (d.failed()) {
      failing.push_back(&d);
    }
  }
  const bool differ = r.cls.kind == CompareClass::Kind::kDiffer;
  out += fmt::format(
      "{} tensors checked, {} compared by value; {} {} tensors; {} step/group "
      "differences\n",
      r.tensors.size(), r.tensors_compared - r.tensors_by_digest, failing.size(),
      differ ? "differing" : "failing", r.structural.size());
  if (r.tensors_by_digest > 0) {
    out += fmt::format(
        "digests: {} of them decided by digests alone (equal digests, or "
        "digest-only tensors), their values not read\n",
        r.tensors_by_digest);
  }
  if (!differ && failing.empty()) {
    // How close a passing comparison came: the largest error over every compared tensor.
    uint64_t max_ulp = 0;
    double max_abs = 0.0, max_rel = 0.0;
    int64_t bits = 0;
    for (const TensorDiff& d : r.tensors) {
      max_ulp = std::max(max_ulp, d.max_ulp);
      max_abs = std::max(max_abs, d.max_abs);
      max_rel = std::max(max_rel, d.max_rel);
      bits += d.bit_mismatches;
    }
    out += fmt::format(
        "observed: {} elements differ in bits, max ULP {}, max |diff| {:.6g}, max "
        "|diff|/|b| {:.6g} (|b| > 1e-6)\n",
        bits, ulp_string(max_ulp), max_abs, max_rel);
  }
  if (r.cls.kind == CompareClass::Kind::kDiffer) {
    out += r.holds() ? "negative control holds: the records differ\n"
                     : "negative control FAILS: the records are bitwise equal\n";
  }
  if (r.first_divergence) {
    out += fmt::format("first divergence: {}\n", r.first_divergence->describe());
    const TensorDiff& f = *r.first_divergence;
    if (f.structural.empty() && f.mismatches > 0) {
      out += fmt::format("  {} of {} elements {}, max ULP {}, max |diff| {:.6g}\n", f.mismatches,
                         f.numel, differ ? "differ" : "outside " + r.cls.to_string(),
                         ulp_string(f.max_ulp), f.max_abs);
    }
  }
  if (!r.structural.empty()) {
    out += "step/group differences:\n";
    for (const std::string& s : r.structural) {
      out += fmt::format("  {}\n", s);
    }
  }
  if (failing.empty()) {
    return out;
  }
  size_t rows = std::min(failing.size(), static_cast<size_t>(std::max(max_rows, 0)));
  size_t width = std::string("tensor").size();
  for (size_t i = 0; i < rows; ++i) {
    width = std::max(width, tensor_column(*failing[i]).size());
  }
  out += differ ? "differing tensors:\n" : "failing tensors:\n";
  out += fmt::format("  {:>6}  {:<{}}  {:>18}  {:>10}  {:>12}\n", "step", "tensor", width,
                     "mismatches/numel", "max ULP", "max |diff|");
  for (size_t i = 0; i < rows; ++i) {
    const TensorDiff& d = *failing[i];
    std::string head = fmt::format("  {:>6}  {:<{}}", d.step, tensor_column(d), width);
    if (!d.structural.empty()) {
      out += fmt::format("{}  {}\n", head, d.structural);
      continue;
    }
    if (d.first_block >= 0) {
      out += fmt::format("{}  {:>18}  digest-only: first differing block {}\n", head,
                         fmt::format("{}/{} blocks", d.differing_blocks, d.blocks), d.first_block);
      continue;
    }
    out +=
        fmt::format("{}  {:>18}  {:>10}  {:>12.6g}\n", head,
                    fmt::format("{}/{}", d.mismatches, d.numel), ulp_string(d.max_ulp), d.max_abs);
  }
  if (failing.size() > rows) {
    out += fmt::format("  ... {} more failing tensors\n", failing.size() - rows);
  }
  return out;
}

}  // namespace mtp::compare
