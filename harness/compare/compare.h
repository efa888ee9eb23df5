// File: harness/compare/compare.h
//
// Compares two step records: structure first (steps, groups, names, dtypes, shapes — every
// difference is reported, never passed silently), then values under a comparison class.
// Structure means every step of the step selection, every group of the group selection and
// every tensor the include/exclude patterns select: one present in a single record is a
// difference, empty or not.
// bitwise: bit patterns equal (+0 ≠ −0; NaN equals NaN only with the same bits).
// ulp:N: for floats, |ordered(a) − ordered(b)| ≤ N where ordered() maps the bit pattern to a
//        monotone integer (so +0 and −0 are 0 ULP apart; any NaN vs non-NaN fails); ints exact.
// tol:RTOL,ATOL: |a − b| ≤ ATOL + RTOL·|b| (b = the second record), NaN only equals NaN, inf
//        only equals the same inf; ints exact.
// rel_l2:B: per tensor, ‖a − b‖₂ / ‖b‖₂ ≤ B over its float elements (b = the second record; the
//        sums in float64, chunk by chunk in a fixed order); any NaN or inf that differs in bits
//        fails; ints exact. The measure mixed-precision results are bounded in (a bf16 run against
//        an fp32 or float64 one): elementwise tolerances fail on the near-zero elements.
// differ: a negative control; holds iff the records are NOT bitwise equal on the selection.
// Digests first (record.h, digest.h): a tensor whose digests are equal in both records is equal
// under every class without reading its values. When they differ and both records hold the
// values, the values are read — both files concurrently, kChunkBytes at a time, straight from
// the file — and compared; when either record holds only digests, the difference is localised
// to the first differing block of kDigestBlockElements elements (`mtp-harness compare
// --localize` re-runs both variants to find the element). A class other than bitwise and differ
// cannot be decided on digests that differ: such a tensor is undecided (never a pass, never a
// failure), and so is the comparison unless another tensor fails; compare --localize re-trains
// its steps in full to decide it, and check records in full what its expectations need.
// Report: first divergent step, first divergent tensor in canonical order (steps ascending;
// groups in record_groups() order; names in record A's creation order), its first differing
// element (flat index and multi-index, both values printed with 17 significant digits, both bit
// patterns in hex), and per tensor the max ULP distance and mismatch count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/common/error.h"
#include "harness/record/record.h"

namespace mtp::compare {

/// A comparison class (architecture.md §5 item 6).
struct CompareClass {
  enum class Kind { kBitwise, kUlp, kTol, kRelL2, kDiffer };
  Kind kind = Kind::kBitwise;
  int64_t max_ulp = 0;      ///< kUlp
  double rtol = 0.0;        ///< kTol
  double atol = 0.0;        ///< kTol
  double max_rel_l2 = 0.0;  ///< kRelL2
  /// Parses "bitwise", "ulp:N" (N ≥ 0 integer), "tol:RTOL,ATOL" (both ≥ 0, finite), "rel_l2:B"
  /// (B ≥ 0, finite), "differ".
  /// Throws InputError naming the text and the accepted forms.
  static CompareClass parse(const std::string& text);
  std::string to_string() const;
  /// Whether digests that differ leave a tensor undecided (ulp, tol, rel_l2: a difference in
  /// bits may be within the class).
  bool needs_values() const {
    return kind == Kind::kUlp || kind == Kind::kTol || kind == Kind::kRelL2;
  }
};

/// Which part of the records to compare.
struct Selection {
  /// subset of record_groups()
  std::vector<std::string> groups = record::default_compared_groups();
  std::vector<std::string> include{"*"};  ///< glob patterns on the dataset name
  std::vector<std::string> exclude;       ///< glob patterns on the dataset name
  /// Steps to compare; empty = every step present in either record.
  std::set<int> steps;
};

/// What differs in one tensor (or that it is structurally different).
struct TensorDiff {
  int step = 0;
  std::string group;
  std::string name;
  std::string
      structural;  ///< non-empty: why the tensor could not be compared (missing, dtype, shape)
  int64_t numel = 0;
  int64_t mismatches = 0;      ///< elements outside the class (bitwise: bit patterns differ)
  int64_t bit_mismatches = 0;  ///< elements whose bits differ (regardless of the class)
  uint64_t max_ulp = 0;        ///< max ULP distance (UINT64_MAX: NaN vs number; ints: |a − b|)
  double max_abs = 0.0;        ///< max |a − b| over finite pairs
  double max_rel = 0.0;        ///< max |a − b| / |b| over finite pairs with |b| > 1e-6
  int64_t first_index = -1;    ///< flat index of the first element outside the class (−1: none)
  std::vector<int64_t> first_coord;  ///< the same as a multi-index
  std::string a_value, b_value;      ///< first element, 17 significant digits
  std::string a_bits, b_bits;        ///< first element's bit pattern, "0x3f800000"
  bool by_digest = false;  ///< decided from digests alone (equal, or digest-only and differing)
  /// Digest-only difference (a record holds no values): the tensor's blocks of
  /// kDigestBlockElements elements, how many differ, the first that does (−1: none).
  int64_t blocks = 0;
  int64_t differing_blocks = 0;
  int64_t first_block = -1;
  std::vector<int64_t> first_block_coord;  ///< multi-index of the first block's first element
  /// Digest-only, digests differing, and the class (ulp, tol) needs values to decide.
  bool undecided = false;
  /// ulp and tol: the largest fraction of the class's limit any element used (|a − b| over
  /// ATOL + RTOL·|b|; ULP distance over N); 1 − it is the headroom. 0 when all bits are equal.
  double max_limit_fraction = 0.0;
  /// rel_l2: Σ (a − b)² over the elements whose bits differ and Σ b² over all, float64; whether
  /// a NaN or inf differs in bits; and ‖a − b‖₂ / ‖b‖₂ (infinity for a non-finite difference or
  /// ‖b‖₂ = 0 < ‖a − b‖₂), set once the whole tensor was seen.
  double sum_sq_diff = 0.0;
  double sum_sq_b = 0.0;
  bool nonfinite_diff = false;
  double rel_l2 = 0.0;
  bool failed() const {
    return !structural.empty() || mismatches > 0 || (first_block >= 0 && !undecided);
  }
  /// "step 1 grad/embedding.word_embeddings.weight[12, 3]: a=... (0x...) b=... (0x...)".
  std::string describe() const;
};

struct CompareResult {
  CompareClass cls;
  std::vector<std::string>
      structural;                   ///< record-level structural differences (missing steps/groups)
  std::vector<TensorDiff> tensors;  ///< every compared tensor, canonical order
  int64_t tensors_compared = 0;     ///< tensors compared, by value or by digests (structural not)
  int64_t tensors_by_digest = 0;    ///< of those, decided by digests without reading values
  /// Tensors whose digests differ in a record that holds no values, under a class that needs
  /// them (TensorDiff::undecided): while any is left and nothing failed, there is no verdict.
  int64_t tensors_undecided = 0;
  /// True iff no structural difference, no tensor outside the class and none undecided. (For
  /// kDiffer the tensor check is bitwise and `holds()` is the negation.)
  bool equal = false;
  /// First failure in canonical order, if any: a failing tensor (structural or value), or, for a
  /// step or group present in only one record (empty or not), a TensorDiff with `structural`
  /// set and an empty name (and an empty group for a whole step).
  std::optional<TensorDiff> first_divergence;
  /// Whether the expectation holds: `equal` for bitwise/ulp/tol, `!equal` for differ.
  bool holds() const { return cls.kind == CompareClass::Kind::kDiffer ? !equal : equal; }
  /// No verdict: nothing failed, but some tensors are undecided (their values are not in the
  /// records). holds() is false then.
  bool undecided() const {
    return tensors_undecided > 0 && structural.empty() &&
           std::none_of(tensors.begin(), tensors.end(),
                        [](const TensorDiff& d) { return d.failed(); });
  }
};

/// One line saying what a comparison measured, whatever the verdict:
///   bitwise equal:  "bitwise equal (12 tensors, 3 of them by digest)"
///   ulp/tol holds:  "within tol:1e-05,1e-06 (12 tensors): 906467 elements differ in bits, max
///                    |diff| 2.1e-06, max |diff|/|b| 0.0003, max ULP 749568; 41% of the limit
///                    used (headroom 59%)"
///   differ holds:   "differ as expected: 5 of 12 tensors differ in bits, first step 1 grad/x[3,
///                    4]: a=… b=…; max |diff| …, max ULP …"
///   fails:          "FAILS tol:…: 3 of 12 tensors outside the class; first step 1 grad/x[…] …"
///   undecided:      "UNDECIDED tol:…: the digests of 4 of 12 tensors differ and their values
///                    are not in the records (first step 2 grad/x block 0)"
std::string verdict_text(const CompareResult& r);

/// Compares `a` against `b` on `sel` under `cls`. Throws RecordError when a file cannot be read,
/// and InputError when `sel` names an unknown group or selects nothing in either record (so a
/// mistyped pattern never passes as "equal").
CompareResult compare_records(const record::RecordReader& a, const record::RecordReader& b,
                              const CompareClass& cls, const Selection& sel);

/// Bytes of each tensor read from each file per round of the value comparison.
inline constexpr size_t kChunkBytes = size_t{16} << 20;

/// Options of compare_records_with beyond the class and the selection.
struct CompareOptions {
  /// Compare values even where the digests are equal (checks that the values behind equal
  /// digests are equal: a record edited or corrupted after it was written).
  bool ignore_digests = false;
};
CompareResult compare_records_with(const record::RecordReader& a, const record::RecordReader& b,
                                   const CompareClass& cls, const Selection& sel,
                                   const CompareOptions& options);

/// Multi-line human report: verdict, first divergence, then one row per failing tensor
/// (step, group/name, mismatches/numel, max ULP, max |diff|), at most `max_rows` rows.
std::string format_report(const CompareResult& r, const std::string& a_label,
                          const std::string& b_label, int max_rows = 20);

}  // namespace mtp::compare
