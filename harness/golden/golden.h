// File: harness/golden/golden.h
//
// Goldens: the digests of every tensor of every step of every variant a scenario records, made
// on a known-good build and committed (golden/digests/<scenario>.txt), so that a CI gate
// compares today's run with last week's, not only variants of one run with each other. A
// change to the code the implementations share moves both alike and passes every expectation;
// it cannot pass the goldens.
//
// File format (text, one fact per line, diffable; `#` lines are comments):
//   mtp-harness-goldens 2               (version 1 files, without scenario_text and losses,
//                                       are read too)
//   scenario <name>
//   scenario_xxh3_128 <32 hex>          the scenario text the goldens were made from
//   scenario_text <count>               then <count> lines "| <line>" ("|" for an empty line):
//                                       that text, so a change to it can be shown as a diff
//   fingerprint <key> <value...>        the environment of the records (harness/common/
//                                       environment.h, engine/determinism.h)
//   names <group> <count>               then <count> lines "  <tensor name>": the group's
//                                       tensors, in the records' canonical order
//   digests <variant> <step> <group> <d_1> … <d_count>
//                                       16 hex digits per tensor (the high half of its XXH3-128
//                                       digest, record/digest.h) in the group's name order;
//                                       "-" where the variant's step holds no such tensor
//   losses <variant> <step> <name>=<value> …
//                                       every step's losses (lm, mtp_1…, total) as numbers
//                                       (shortest round-trip decimal of the recorded value), so
//                                       that the size of a change is visible
//
// Example:
//   GoldenFile now = golden_from_records("default", text_digest, {{"ref_p1", "runs/x/ref_p1.h5"}});
//   GoldenDiff d = diff_goldens(read_golden_file("golden/digests/default.txt"), now);
//   if (!d.fingerprint_bits.empty()) …refuse…; if (!d.equal()) …exit 1…
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mtp::golden {

/// One variant's step and group: a digest per name of the group's table (empty string: absent).
struct DigestRow {
  std::string variant;
  int step = 0;
  std::string group;
  std::vector<std::string> digests;  ///< 16 hex digits or "" (absent), by names[group] order
};

/// One variant's step: its losses by name, in the record's order.
struct LossRow {
  std::string variant;
  int step = 0;
  std::vector<std::pair<std::string, double>> values;
};

struct GoldenFile {
  std::string source;     ///< the file it was parsed from ("" when made from records)
  int scenario_line = 0;  ///< the line of its "scenario" line (0 when made from records)
  std::string scenario;
  std::string scenario_digest;  ///< XXH3-128 of the scenario text (32 hex)
  std::string scenario_text;    ///< the text itself ("" in a version-1 file)
  std::map<std::string, std::string> fingerprint;
  /// Per group (in record_groups() order of first appearance), the tensor names.
  std::vector<std::pair<std::string, std::vector<std::string>>> names;
  std::vector<DigestRow> rows;  ///< variants in scenario order, steps ascending, groups canonical
  std::vector<LossRow> losses;  ///< variants in scenario order, steps ascending

  /// The names of `group` (empty when the group has none).
  const std::vector<std::string>& names_of(const std::string& group) const;
  /// The digest of (variant, step, group, name), "" when absent.
  std::string digest(const std::string& variant, int step, const std::string& group,
                     const std::string& name) const;
};

/// The goldens of records `records` (variant name → path, in scenario order) of a scenario
/// called `scenario` with text `scenario_text` (its digest: record::digest_bytes of the text);
/// the fingerprint is the first record's environment attributes; the losses are read from the
/// records. Throws RecordError for unreadable records, records without digests (schema version
/// 1) or a loss that is not a float scalar, InputError when the records' fingerprints disagree
/// or a record holds a non-finite value (goldens of NaN runs would pass NaN runs).
GoldenFile golden_from_records(const std::string& scenario, const std::string& scenario_text,
                               const std::vector<std::pair<std::string, std::string>>& records);

/// The digest that identifies a scenario text in goldens (XXH3-128, 32 hex digits).
std::string scenario_text_digest(const std::string& text);

/// The file's text (format above).
std::string format_golden(const GoldenFile& g);

/// Parses `text` (read from `source`). Throws InputError "<source>:<line>: <rule broken>": a
/// carriage return (CRLF line ends) outside the scenario text and the tensor names, which keep
/// the records' bytes; a malformed line, or one with words after its
/// counts; a scenario, scenario_xxh3_128, scenario_text, fingerprint key, group's names, tensor
/// name within a group, (variant, step, group) digest row, (variant, step) losses row or loss
/// name within a row given twice (naming the line of the first too); a group that is not a
/// record group; counts that do not match; a loss that is not a finite number; scenario_text or
/// losses lines in a format-1 file; a format-2 file without scenario_xxh3_128 or scenario_text;
/// a scenario text whose digest is not scenario_xxh3_128 (with or without a final newline:
/// format_golden writes both alike).
GoldenFile parse_golden(const std::string& text, const std::string& source);

/// Reads and parses `path` (InputError when missing or malformed), and, when
/// `expected_scenario` is given, check_scenario(it, expected_scenario).
GoldenFile read_golden_file(const std::string& path, const std::string& expected_scenario = "");

/// Throws InputError "<source>:<line>: the goldens are of scenario "A", not of scenario "B" that
/// is being checked" (the line of the file's scenario line) unless g.scenario == `scenario`.
void check_scenario(const GoldenFile& g, const std::string& scenario);

/// One tensor whose digest differs (or is in one file only).
struct TensorChange {
  std::string variant;
  int step = 0;
  std::string group, name;
  std::string golden, now;  ///< 16 hex digits, "" = absent
  /// "variant ref_p1 step 1 grad/x: golden 0123… now 4567…" ("absent" for "").
  std::string describe() const;
};

/// The changed tensors of one (variant, step, group).
struct ChangeGroup {
  std::string variant;
  int step = 0;
  std::string group;
  int64_t changed = 0, total = 0;  ///< tensors whose digest changed, of those in either file
  std::string first;               ///< the first changed tensor's name
};

/// One loss whose value differs (or is in one file only).
struct LossChange {
  std::string variant;
  int step = 0;
  std::string name;
  std::optional<double> golden, now;
  /// "lm 2.7750785 → 2.7751031 (Δ +2.46e-05, 8.9e-06 relative)".
  std::string describe() const;
};

/// What differs between the committed goldens and a run's.
struct GoldenDiff {
  /// Fingerprint keys that can change bits (fingerprint_key_changes_bits) and differ:
  /// "blas: <golden> → <now>". golden check refuses to compare across them.
  std::vector<std::string> fingerprint_bits;
  /// Informational keys that differ (cpu_model, os, hdf5, …).
  std::vector<std::string> fingerprint_info;
  bool scenario_changed = false;
  /// The scenario text's lines that changed, "- old line" / "+ new line" in text order (empty
  /// when either file lacks the text or it did not change).
  std::vector<std::string> scenario_text_diff;
  /// Losses that differ, in the golden file's order (empty when the goldens have no losses).
  std::vector<LossChange> loss_changes;
  std::vector<TensorChange> changes;  ///< canonical order: variants, steps, groups, names
  /// The changes summed up by (variant, step, group), same order; only groups with a change.
  std::vector<ChangeGroup> changed_groups;
  int64_t tensors = 0;  ///< tensors in either file
  bool equal() const { return changes.empty(); }
};

/// Compares `golden` with `now`, tensor by tensor and loss by loss. Throws InputError
/// (check_scenario) when both name a scenario and the names differ.
GoldenDiff diff_goldens(const GoldenFile& golden, const GoldenFile& now);

/// The changed lines of `b` against `a` (both split at newlines): a shortest edit script from a
/// longest common subsequence, "- line" for a line only in a, "+ line" for one only in b, in text
/// order. Texts of more than 5,000 lines are compared line by line at equal positions instead.
std::vector<std::string> line_diff(const std::string& a, const std::string& b);

}  // namespace mtp::golden
