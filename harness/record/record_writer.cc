// RecordWriter: writes a unique temporary beside the record and renames it in commit()
// (record.h, harness/common/temp_file.h).

#include <sys/stat.h>

#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <map>

#include "harness/common/temp_file.h"
#include "harness/common/utf8.h"
#include "harness/record/h5.h"
#include "harness/record/h5_attr.h"
#include "harness/record/h5_dtype.h"
#include "harness/record/record.h"
#include "harness/record/schema.h"

namespace mtp::record {
namespace {

/// Opens child group `name` of `parent`, creating it if needed.
h5::Group ensure_group(const h5::Group& parent, const std::string& name) {
  return parent.has(name) ? parent.open_group(name) : parent.create_group(name);
}

}  // namespace

struct RecordWriter::Impl {
  std::string path;
  std::unique_ptr<TempFile> tmp;
  h5::File file;  // declared before `steps`, so `steps` closes first
  h5::Group steps;
  bool committed = false;
  /// Each (step, group)'s tensor_index (record.h), written to the group in commit().
  std::map<std::pair<int, std::string>, nlohmann::json> index;
  /// The first non-finite element written (finite.h), and how many tensors held any.
  std::optional<NonFiniteValue> first_nonfinite;
  int64_t nonfinite_tensors = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw RecordError(fmt::format("{}: {}", path, what));
  }

  /// Closes every handle (errors ignored) and removes the temporary.
  void abandon() {
    steps = h5::Group();
    file = h5::File();
    if (tmp) tmp->remove();
  }

  /// Runs HDF5 calls `f` on the open temporary. Their failure is an I/O fault (disk full, write
  /// error), not bad input: the temporary is abandoned and RecordWriteError thrown.
  template <typename F>
  auto io(F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const RecordError& e) {
      abandon();
      throw RecordWriteError(fmt::format("{}: cannot write the record: {}", path, e.what()));
    }
  }

  void require_open() const {
    if (!file.valid()) {
      fail(committed ? "record already committed" : "record writer is closed after an error");
    }
  }

  void require_step(int step, const std::string& where) const {
    if (step < 0 || step > kMaxStep) {
      fail(fmt::format("{}: step outside [0, {}]", where, kMaxStep));
    }
  }

  h5::Group step_group(int step) const { return ensure_group(steps, step_group_name(step)); }
};

RecordWriter::RecordWriter(const std::string& path) : impl_(std::make_unique<Impl>()) {
  h5::ErrorSilencer quiet;
  impl_->path = path;
  std::string dir = parent_directory(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    impl_->fail(fmt::format("parent directory '{}' does not exist", dir));
  }
  impl_->tmp = std::make_unique<TempFile>(path);
  impl_->file = h5::File::create(impl_->tmp->path());  // exclusive: no link is followed
  impl_->tmp->created();
  impl_->io([&] {
    write_attr(impl_->file.root(), kSchemaVersionAttr, kSchemaVersion);
    impl_->steps = impl_->file.root().create_group("steps");
  });
}

RecordWriter::~RecordWriter() {
  if (impl_ == nullptr || impl_->committed) {
    return;
  }
  h5::ErrorSilencer quiet;
  impl_->abandon();
}

void RecordWriter::set_attr(const std::string& key, const AttrValue& value) {
  h5::ErrorSilencer quiet;
  impl_->require_open();
  impl_->io([&] { write_attr(impl_->file.root(), key, value); });
}

void RecordWriter::set_step_attr(int step, const std::string& key, const AttrValue& value) {
  h5::ErrorSilencer quiet;
  impl_->require_open();
  impl_->require_step(step, fmt::format("step attribute '{}'", key));
  impl_->io([&] { write_attr(impl_->step_group(step), key, value); });
}

void RecordWriter::write(int step, const std::string& group, const TensorView& t, Storage storage,
                         const TensorDigest* digest, int digest_threads,
                         const NonFinite* nonfinite) {
  h5::ErrorSilencer quiet;
  impl_->require_open();
  std::string where = fmt::format("step {} group '{}' tensor '{}'", step, group, t.name);
  if (group_index(group) < 0) {
    impl_->fail(fmt::format("{}: unknown group (expected one of {})", where,
                            fmt::join(record_groups(), ", ")));
  }
  std::string problem = dataset_name_problem(t.name);
  if (problem.empty() && !is_valid_utf8(t.name)) problem = "the name is not valid UTF-8";
  if (!problem.empty()) {
    impl_->fail(fmt::format("{}: invalid dataset name: {}", where, problem));
  }
  impl_->require_step(step, where);
  std::vector<hsize_t> dims;
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0) {
      impl_->fail(fmt::format("{}: negative dimension {}", where, d));
    }
    dims.push_back(static_cast<hsize_t>(d));
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) {
      impl_->fail(fmt::format("{}: element count overflows", where));
    }
    numel *= static_cast<uint64_t>(d);
  }
  uint64_t want = numel * static_cast<uint64_t>(dtype_size(t.dtype));
  if (numel > std::numeric_limits<uint64_t>::max() / 8 || want != t.nbytes) {
    impl_->fail(fmt::format("{}: {} bytes given, but {} elements of {} need {}", where, t.nbytes,
                            numel, dtype_name(t.dtype), want));
  }
  MTP_INTERNAL_ASSERT(
      t.data != nullptr || t.nbytes == 0 || (storage == Storage::kDigest && digest != nullptr),
      fmt::format("{}: no bytes to write or digest", where));
  TensorDigest computed;
  if (digest == nullptr) {
    computed = digest_bytes(t.data, t.nbytes, dtype_size(t.dtype), digest_threads);
    digest = &computed;
  }
  MTP_INTERNAL_ASSERT(
      static_cast<int64_t>(digest->blocks.size()) ==
          (static_cast<int64_t>(numel) + kDigestBlockElements - 1) / kDigestBlockElements,
      fmt::format("{}: digest has {} blocks for {} elements", where, digest->blocks.size(), numel));

  h5::Group g = impl_->io([&] { return ensure_group(impl_->step_group(step), group); });
  if (impl_->io([&] { return g.has(t.name); })) {
    impl_->fail(fmt::format("{}: written twice", where));
  }
  impl_->io([&] {
    const bool full = storage == Storage::kFull;
    h5::DataSpace space = !full             ? h5::DataSpace::null()
                          : t.shape.empty() ? h5::DataSpace::scalar()
                                            : h5::DataSpace::simple(dims);
    h5::Dataset ds = g.create_dataset(t.name, file_type(t.dtype), space);
    write_attr(ds, kDTypeAttr, std::string(dtype_name(t.dtype)));
    if (!full) {
      write_attr(ds, kStorageAttr, std::string(storage_name(storage)));
      write_attr(ds, kShapeAttr, fmt::format("[{}]", fmt::join(t.shape, ", ")));
    }
    write_attr(ds, kDigestAttr, digest->whole.hex());
    if (!digest->blocks.empty()) {
      std::vector<uint64_t> halves;
      halves.reserve(2 * digest->blocks.size());
      for (const Digest128& b : digest->blocks) {
        halves.push_back(b.high);
        halves.push_back(b.low);
      }
      write_u64_matrix_attr(ds, kBlockDigestsAttr, halves, 2);
    }
    if (full && numel > 0) {
      ds.write(memory_type(t.dtype), t.data);
    }
  });
  const NonFinite nf = nonfinite != nullptr ? *nonfinite
                       : t.data != nullptr  ? find_nonfinite(t.data, t.nbytes, t.dtype)
                                            : NonFinite{};
  if (nf.count > 0) {
    ++impl_->nonfinite_tensors;
    if (!impl_->first_nonfinite) {
      impl_->first_nonfinite = NonFiniteValue{step, group, t.name, t.dtype, t.shape, nf, 0};
    }
  }
  nlohmann::json& entries = impl_->index[{step, group}];
  if (entries.is_null()) entries = nlohmann::json::array();
  entries.push_back(
      {t.name, dtype_name(t.dtype), t.shape, storage_name(storage), digest->whole.hex()});
}

void RecordWriter::commit() {
  h5::ErrorSilencer quiet;
  impl_->require_open();
  impl_->io([&] {
    if (impl_->first_nonfinite) {
      impl_->first_nonfinite->tensors = impl_->nonfinite_tensors;
      write_attr(impl_->file.root(), kFirstNonFiniteAttr, impl_->first_nonfinite->to_json());
    }
    for (const auto& [where, entries] : impl_->index) {
      h5::Group g = impl_->step_group(where.first).open_group(where.second);
      write_attr(g, kTensorIndexAttr, entries.dump());
    }
    impl_->steps.close();
    impl_->file.close();  // flushes
  });
  impl_->tmp->commit();  // fsync, rename, directory sync; InfraError (temporary removed)
  impl_->committed = true;
}

}  // namespace mtp::record
