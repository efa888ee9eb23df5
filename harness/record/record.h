// File: harness/record/record.h
//
// The HDF5 step record of one variant (architecture.md §6):
//   /                       attrs: hyperparameters under Megatron's names, variant facts, env
//   /steps/000000/weight/   <global name>: initial weights
//   /steps/NNNNNN/batch/    tokens, labels, loss_mask [M, b, s]
//   /steps/NNNNNN/loss/     lm, mtp_1..mtp_D, total
//   /steps/NNNNNN/grad/     <global name>: main grad after finalisation, before clip/optimizer
//   /steps/NNNNNN/weight/   <global name>: after the optimizer step
//   /steps/NNNNNN/optimizer/ step, <global name>.exp_avg, <global name>.exp_avg_sq: Adam's
//                           state after the step (opt-in: engine/checkpoint.h)
//   /steps/NNNNNN/          attrs: grad_norm, clip_coeff (when computed)
// Groups track link creation order, and datasets are written in canonical order (the order of
// the model's parameters), so readers list names in that order. Object timestamps are off, so
// the same content gives the same bytes.
//
// Writing is atomic: RecordWriter writes a unique temporary "<path>.tmp-<pid>-<random>",
// created exclusively beside <path> (harness/common/temp_file.h: no link is followed, two
// writers never share it, a signal removes it), and renames it to <path> in commit(); a writer
// destroyed without commit(), or failing to write (disk full), removes its temporary, so no
// half-written record is ever left under the final name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "harness/common/error.h"
#include "harness/record/tensor_data.h"

namespace mtp::record {

/// A record file that cannot be opened, read or does not follow the schema. what() names the
/// file, the object path and the rule broken.
class RecordError : public InputError {
 public:
  explicit RecordError(const std::string& msg) : InputError(msg) {}
};

/// A record that could not be written: an I/O fault (disk full, write error) while writing or
/// committing. The writer has removed its temporary and refuses further work.
class RecordWriteError : public InfraError {
 public:
  explicit RecordWriteError(const std::string& msg) : InfraError(msg) {}
};

/// The groups of a step, in canonical order. "weight" holds the weights the optimizer updates
/// (the fp32 master weights of a bf16 run); "model_weight" (bf16 runs only) the model's own
/// bf16 weights, re-cast from the masters after each step.
inline const std::vector<std::string>& record_groups() {
  static const std::vector<std::string> g{"batch", "loss", "grad", "weight", "model_weight",
                                          "optimizer"};
  return g;
}

/// The optimizer group (engine/checkpoint.h), the name of its step count, and the datasets of a
/// parameter's Adam moments: "<param>.exp_avg", "<param>.exp_avg_sq".
inline constexpr const char* kOptimizerGroup = "optimizer";
inline constexpr const char* kOptimizerStepName = "step";
inline std::string exp_avg_name(const std::string& param) { return param + ".exp_avg"; }
inline std::string exp_avg_sq_name(const std::string& param) { return param + ".exp_avg_sq"; }

using AttrValue = std::variant<int64_t, double, std::string>;
using AttrMap = std::map<std::string, AttrValue>;

/// "000007" for step 7 (6 digits, zero padded).
std::string step_group_name(int step);

class RecordWriter {
 public:
  /// Creates the temporary beside `path` (the parent directory must exist and the temporary
  /// be creatable: RecordError otherwise).
  explicit RecordWriter(const std::string& path);
  ~RecordWriter();  ///< removes the temporary file unless commit() succeeded
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  /// Sets a root attribute (int64, double or string). RecordWriteError on an I/O fault.
  void set_attr(const std::string& key, const AttrValue& value);
  /// Sets an attribute on /steps/NNNNNN (created if needed). RecordWriteError on an I/O fault.
  void set_step_attr(int step, const std::string& key, const AttrValue& value);
  /// Writes dataset /steps/NNNNNN/<group>/<t.name>. `group` ∈ record_groups(); a name written
  /// twice, a name containing '/' or an inconsistent byte count throws RecordError; an I/O
  /// fault throws RecordWriteError.
  void write(int step, const std::string& group, const TensorData& t);
  /// Flushes, closes, syncs and renames the file to its final path. Throws RecordWriteError or
  /// InfraError on an I/O fault (nothing is left under either name), RecordError when already
  /// committed.
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class RecordReader {
 public:
  /// Opens `path` read-only and checks the schema (a /steps group whose children are 6-digit step
  /// names, each with only known groups, holding datasets with UTF-8 names). Throws RecordError
  /// naming the file and what is wrong (missing file, not HDF5, truncated, wrong layout).
  explicit RecordReader(const std::string& path);
  ~RecordReader();
  RecordReader(RecordReader&&) noexcept;

  const std::string& path() const;
  /// Root attributes.
  AttrMap attrs() const;
  /// Attributes of /steps/NNNNNN.
  AttrMap step_attrs(int step) const;
  /// Step numbers present, ascending.
  std::vector<int> steps() const;
  /// The groups present in `step`, in canonical order (subset of record_groups()).
  std::vector<std::string> groups(int step) const;
  /// Dataset names of /steps/NNNNNN/<group>, in creation (canonical) order.
  std::vector<std::string> names(int step, const std::string& group) const;
  /// dtype and shape without reading the data.
  TensorData describe(int step, const std::string& group, const std::string& name) const;
  /// Reads one dataset. Throws RecordError if it does not exist, cannot be read, or declares
  /// more bytes than the memory available (a corrupt shape is an input error, not bad_alloc).
  TensorData read(int step, const std::string& group, const std::string& name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtp::record
