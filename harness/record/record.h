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
//
// Format version kSchemaVersion (root attribute `schema_version`; a record without it is version
// 1). Every dataset carries attributes `dtype`, `xxh3_128` (the tensor digest, 32 hex digits) and
// `xxh3_128_blocks` (uint64 [blocks, 2]: each block's digest, high half then low; digest.h) —
// version 1 records carry only `dtype`. A tensor stored in full holds its bytes; a digest-only
// tensor (Storage::kDigest: `record = "digest"`) is a dataset with a null dataspace, the file
// type of its dtype, and attributes `storage` = "digest" and `shape` ("[8, 2, 32]", "[]" for a
// scalar) besides the digests. Every group of a step also carries the attribute
// `tensor_index` (version 2): a JSON array, in creation order, of
// [name, dtype, [shape...], "full" | "digest", "<xxh3_128>"] for each of its datasets, so that
// names, shapes and digests are known without opening a dataset (what makes a digest comparison
// cheap); the reader checks each dataset against it when the dataset is opened.
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
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "harness/common/error.h"
#include "harness/record/digest.h"
#include "harness/record/finite.h"
#include "harness/record/schema.h"
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

/// The record format version written to the root attribute `schema_version` (record.h's
/// opening comment says what each version holds).
inline constexpr int64_t kSchemaVersion = 2;
inline constexpr const char* kSchemaVersionAttr = "schema_version";

/// Storage: how a tensor is kept in the record. kFull: its bytes and digests; kDigest: only
/// its digests (shape and dtype too), a few bytes per 64 Ki elements.
enum class Storage { kFull, kDigest };
/// "full" | "digest".
const char* storage_name(Storage s);

/// TensorView: a tensor to write, whose bytes the caller keeps alive during the call
/// (row-major, `nbytes == numel · dtype_size(dtype)`). `data` may be null for a digest-only write
/// whose digest the caller gives (RecordWriter::write): its bytes are never read.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  static TensorView of(const TensorData& t) {
    return TensorView{t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()};
  }
};

/// TensorInfo: what the record says about one tensor without reading its bytes (from the
/// group's tensor index when the record has one: no dataset is opened).
struct TensorInfo {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  bool stored = true;               ///< false: digest-only (Storage::kDigest)
  std::optional<Digest128> digest;  ///< the tensor's digest; nullopt for version-1 records
  int64_t numel() const;
};

using AttrValue = std::variant<int64_t, double, std::string>;
using AttrMap = std::map<std::string, AttrValue>;

/// The HDF5 library's version, "1.10.8" (for the environment fingerprint).
std::string hdf5_library_version();

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
  /// Writes dataset /steps/NNNNNN/<group>/<t.name> with its digests, its bytes only when
  /// `storage` is kFull. `digest`: the digest of t's bytes when the caller has computed it
  /// (computed here otherwise; `digest_threads` threads). `nonfinite`: t's non-finite elements
  /// when the caller has found them (a digest-only tensor whose bytes it does not give); else
  /// t's bytes are scanned here (finite.h). The first non-finite element written goes to the
  /// root attribute first_nonfinite at commit(). `group` ∈ record_groups(); a name
  /// written twice, a name containing '/' or an inconsistent byte count throws RecordError; an
  /// I/O fault throws RecordWriteError.
  void write(int step, const std::string& group, const TensorView& t,
             Storage storage = Storage::kFull, const TensorDigest* digest = nullptr,
             int digest_threads = 1, const NonFinite* nonfinite = nullptr);
  void write(int step, const std::string& group, const TensorData& t,
             Storage storage = Storage::kFull) {
    write(step, group, TensorView::of(t), storage);
  }
  void write(int step, Group group, const TensorData& t, Storage storage = Storage::kFull) {
    write(step, group_name(group), TensorView::of(t), storage);
  }
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
  std::vector<std::string> names(int step, Group group) const {
    return names(step, group_name(group));
  }
  /// Whether `step` holds group `group`.
  bool has_group(int step, Group group) const;
  /// dtype and shape without reading the data.
  TensorData describe(int step, const std::string& group, const std::string& name) const;
  TensorData describe(int step, Group group, const std::string& name) const {
    return describe(step, group_name(group), name);
  }
  /// dtype, shape, storage and digest (indexed when the record was opened; no dataset I/O).
  const TensorInfo& info(int step, const std::string& group, const std::string& name) const;
  /// info(), after opening the dataset (once) and checking that it is a dataset whose dtype,
  /// shape, storage and digest attributes are the index's: what a verdict that rests on the
  /// stored digest needs (a group, a string or resized dataset in a tensor's place is refused).
  /// The data bytes are not read. Throws RecordError naming the object and the disagreement.
  const TensorInfo& verified_info(int step, const std::string& group,
                                  const std::string& name) const;
  /// The tensor's block digests (opens the dataset and checks it against the index). Throws
  /// RecordError for a version-1 record (no digests) or a dataset that disagrees.
  TensorDigest block_digests(int step, const std::string& group, const std::string& name) const;
  /// File offset of the raw bytes when they can be read from the file directly (contiguous,
  /// allocated, stored in the native little-endian layout of its dtype); nullopt otherwise
  /// (digest-only tensors too). Opens the dataset (checked against the index).
  std::optional<uint64_t> raw_offset(int step, const std::string& group,
                                     const std::string& name) const;
  /// The record format version (root attribute schema_version; 1 when absent).
  int64_t schema_version() const;
  /// The first non-finite value the writer saw (root attribute first_nonfinite, finite.h);
  /// nullopt for a record whose every float is finite. Throws RecordError when the attribute is
  /// not the JSON the writer makes.
  std::optional<NonFiniteValue> first_nonfinite() const;
  /// Reads one dataset. Throws RecordError if it does not exist, holds only a digest, cannot be
  /// read, or declares more bytes than the memory available (a corrupt shape is an input error,
  /// not bad_alloc).
  TensorData read(int step, const std::string& group, const std::string& name) const;
  TensorData read(int step, Group group, const std::string& name) const {
    return read(step, group_name(group), name);
  }
  /// Reads `n` bytes of the tensor's data starting at byte `offset` into `out`: straight from the
  /// file with pread when raw_offset() is set (callable from several threads at once),
  /// else through read(). Throws RecordError for a digest-only tensor, a range past the tensor,
  /// or a file shorter than the dataset claims.
  void read_bytes(int step, const std::string& group, const std::string& name, uint64_t offset,
                  size_t n, void* out) const;
  /// The tensor's bytes in place, without a copy: a read-only memory map of the file (made on
  /// first use, shared by every tensor, unmapped with the reader) when raw_offset() is set and
  /// the data lies within the file; nullopt otherwise (then use read_bytes). The pointer stays
  /// valid while the reader lives (a file truncated meanwhile by another process would fault).
  std::optional<std::pair<const uint8_t*, size_t>> mapped_bytes(int step, const std::string& group,
                                                                const std::string& name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtp::record
