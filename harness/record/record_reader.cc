// RecordReader: opens a step record, checks its schema once and indexes every dataset's dtype and
// shape, so listing and describe() need no further I/O (record.h).

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/common/system_memory.h"
#include "harness/common/utf8.h"

#include "harness/record/h5.h"
#include "harness/record/h5_attr.h"
#include "harness/record/h5_dtype.h"
#include "harness/record/record.h"
#include "harness/record/schema.h"

namespace mtp::record {
namespace {

struct GroupIndex {
  std::vector<std::string> names;                      ///< creation order
  std::unordered_map<std::string, TensorInfo> descs;  ///< dtype, shape, storage, digests
};

struct StepIndex {
  std::vector<std::optional<GroupIndex>> groups;  ///< indexed like record_groups()
};

const char* link_kind(H5L_type_t t) {
  switch (t) {
    case H5L_TYPE_SOFT:
      return "a soft link";
    case H5L_TYPE_EXTERNAL:
      return "an external link";
    default:
      return "a user-defined link";
  }
}

const char* object_kind(H5I_type_t t) {
  switch (t) {
    case H5I_GROUP:
      return "a group";
    case H5I_DATASET:
      return "a dataset";
    case H5I_DATATYPE:
      return "a named datatype";
    default:
      return "an unknown object";
  }
}

}  // namespace

struct RecordReader::Impl {
  std::string path;
  h5::File file;
  int fd = -1;            // for read_bytes (pread); opened after the schema check
  uint64_t file_size = 0;
  ~Impl() {
    if (fd >= 0) ::close(fd);
  }
  std::map<int, StepIndex> steps;

  [[noreturn]] void fail(const std::string& object, const std::string& what) const {
    if (object.empty()) {
      throw RecordError(fmt::format("{}: {}", path, what));
    }
    throw RecordError(fmt::format("{}: {}: {}", path, object, what));
  }

  void open();
  void index();  // reads /steps and every group's dataset list
  void probe_in_child(int version) const;  // index() in a child; a crash is bad input
  void require(const h5::Group& parent, const h5::Link& link, H5I_type_t want) const;
  GroupIndex index_group(const h5::Group& g) const;
  TensorInfo describe_dataset(const h5::Dataset& ds) const;
  std::optional<TensorDigest> read_digest(const h5::Dataset& ds, int64_t numel) const;
  int64_t schema_version = 1;

  const StepIndex& step(int s) const {
    auto it = steps.find(s);
    if (it == steps.end()) {
      fail("", fmt::format("no step {} in the record", s));
    }
    return it->second;
  }

  const GroupIndex& group(int s, const std::string& g) const {
    const StepIndex& st = step(s);
    int i = group_index(g);
    if (i < 0 || !st.groups[static_cast<size_t>(i)]) {
      fail("", fmt::format("no group '{}' in step {}", g, s));
    }
    return *st.groups[static_cast<size_t>(i)];
  }

  const TensorInfo& desc(int s, const std::string& g, const std::string& name) const {
    const GroupIndex& gi = group(s, g);
    auto it = gi.descs.find(name);
    if (it == gi.descs.end()) {
      fail("", fmt::format("no dataset '{}' in step {} group '{}'", name, s, g));
    }
    return it->second;
  }

  static std::string dataset_path(int s, const std::string& g, const std::string& name) {
    return fmt::format("steps/{}/{}/{}", step_group_name(s), g, name);
  }
};

void RecordReader::Impl::require(const h5::Group& parent, const h5::Link& link,
                                 H5I_type_t want) const {
  std::string object = parent.where().child(link.name).path;
  if (link.type != H5L_TYPE_HARD) {
    fail(object,
         fmt::format("is {}; a record holds only groups and datasets", link_kind(link.type)));
  }
  H5I_type_t got = parent.kind_of(link.name);
  if (got != want) {
    fail(object, fmt::format("is {}, expected {}", object_kind(got), object_kind(want)));
  }
}

std::optional<TensorDigest> RecordReader::Impl::read_digest(const h5::Dataset& ds,
                                                            int64_t numel) const {
  const bool has_whole = ds.has_attribute(kDigestAttr);
  const bool has_blocks = ds.has_attribute(kBlockDigestsAttr);
  const int64_t nblocks = (numel + kDigestBlockElements - 1) / kDigestBlockElements;
  if (!has_whole) {
    if (has_blocks) fail(ds.where().path, fmt::format("has '{}' without '{}'", kBlockDigestsAttr,
                                                      kDigestAttr));
    return std::nullopt;
  }
  TensorDigest d;
  const std::string hex = read_string_attr(ds, kDigestAttr);
  const std::optional<Digest128> whole = Digest128::parse_hex(hex);
  if (!whole) {
    fail(ds.where().path, fmt::format("attribute '{}' is \"{}\", not 32 hex digits", kDigestAttr,
                                      printable(hex)));
  }
  d.whole = *whole;
  if (has_blocks) {
    const std::vector<uint64_t> halves = read_u64_matrix_attr(ds, kBlockDigestsAttr, 2);
    for (size_t i = 0; i + 1 < halves.size(); i += 2) d.blocks.push_back({halves[i], halves[i + 1]});
  }
  if (static_cast<int64_t>(d.blocks.size()) != nblocks) {
    fail(ds.where().path, fmt::format("attribute '{}' holds {} block digests; {} elements need {}",
                                      kBlockDigestsAttr, d.blocks.size(), numel, nblocks));
  }
  if (combine_block_digests(d.blocks) != d.whole) {
    fail(ds.where().path, fmt::format("attribute '{}' is not the digest of its block digests "
                                      "'{}' (a corrupt or hand-edited record)",
                                      kDigestAttr, kBlockDigestsAttr));
  }
  return d;
}

TensorInfo RecordReader::Impl::describe_dataset(const h5::Dataset& ds) const {
  TensorInfo t;
  t.dtype = dataset_dtype(ds);
  h5::DataSpace space = ds.space();
  if (space.kind() == H5S_NULL) {
    // A digest-only tensor: its shape is an attribute.
    if (!ds.has_attribute(kStorageAttr) ||
        read_string_attr(ds, kStorageAttr) != storage_name(Storage::kDigest)) {
      fail(ds.where().path, fmt::format("has a null dataspace (no shape) but no {} = \"digest\" "
                                        "attribute; expected a scalar or an array",
                                        kStorageAttr));
    }
    if (!ds.has_attribute(kShapeAttr) || !ds.has_attribute(kDigestAttr)) {
      fail(ds.where().path, fmt::format("is digest-only but lacks the '{}' or '{}' attribute",
                                        kShapeAttr, kDigestAttr));
    }
    const std::string text = read_string_attr(ds, kShapeAttr);
    const auto dims = parse_shape_attr(text);
    if (!dims) {
      fail(ds.where().path, fmt::format("attribute '{}' is \"{}\"; expected \"[d0, d1, ...]\"",
                                        kShapeAttr, printable(text)));
    }
    t.shape = *dims;
    t.stored = false;
  } else {
    if (ds.has_attribute(kStorageAttr)) {
      fail(ds.where().path, fmt::format("holds data but has a '{}' attribute", kStorageAttr));
    }
    for (hsize_t d : space.dims()) t.shape.push_back(static_cast<int64_t>(d));
  }
  uint64_t max_elems = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
                       static_cast<uint64_t>(dtype_size(t.dtype));
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    const uint64_t u = static_cast<uint64_t>(d);
    if (u != 0 && numel > max_elems / u) {
      fail(ds.where().path, "is too large to read");
    }
    numel *= u;
  }
  t.digest = read_digest(ds, static_cast<int64_t>(numel));
  if (schema_version >= 2 && !t.digest) {
    fail(ds.where().path, fmt::format("has no '{}' attribute (a record of schema version {} "
                                      "digests every tensor)", kDigestAttr, schema_version));
  }
  if (t.stored && numel > 0 && ds.type().equals(memory_type(t.dtype))) {
    t.raw_offset = ds.raw_offset();
  }
  return t;
}

GroupIndex RecordReader::Impl::index_group(const h5::Group& g) const {
  GroupIndex gi;
  for (const h5::Link& link : g.links()) {
    if (!is_valid_utf8(link.name)) {
      // Names go into JSON reports, which hold only UTF-8.
      fail(printable(g.where().child(link.name).path), "dataset name is not valid UTF-8");
    }
    require(g, link, H5I_DATASET);
    h5::Dataset ds = g.open_dataset(link.name);
    gi.descs.emplace(link.name, describe_dataset(ds));
    gi.names.push_back(link.name);
  }
  return gi;
}

namespace {

/// The superblock version of the HDF5 file at `path` (the byte after the signature, which sits
/// at offset 0, 512, 1024, 2048, …), or −1 when no signature is found in the first 64 KiB.
int superblock_version(const std::string& path) {
  static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return -1;
  int version = -1;
  for (long offset = 0; offset <= 65536 && version < 0; offset = offset == 0 ? 512 : 2 * offset) {
    unsigned char buf[9];
    if (std::fseek(f, offset, SEEK_SET) != 0 || std::fread(buf, 1, 9, f) != 9) break;
    if (std::memcmp(buf, kSignature, 8) == 0) version = buf[8];
  }
  std::fclose(f);
  return version;
}

}  // namespace

void RecordReader::Impl::open() {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    fail("", fmt::format("cannot open record: {}", std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    fail("", "is a directory, not a record file");
  }
  if (!S_ISREG(st.st_mode)) {
    fail("", "is not a regular file (a FIFO, device or socket cannot be a record)");
  }
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    fail("", fmt::format("cannot open record: {}", std::strerror(errno)));
  }
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 == 0) {
    h5::take_error_message();
    fail("", "not an HDF5 file (no HDF5 signature)");
  }
  if (is_hdf5 < 0) {
    std::string detail = h5::take_error_message();
    fail("", fmt::format("not a readable HDF5 file (HDF5: {})", detail));
  }
  // Files of the earliest HDF5 format carry no metadata checksums, and HDF5 1.10.8 can crash
  // (SIGSEGV in H5F__accum_read) on corrupt metadata of such a file (fuzz finding
  // testdata/hdf5_1_10_8_earliest_format_segv.h5). Their metadata is indexed in a child process
  // first, so a crash becomes bad input. Records RecordWriter writes (superblock 2, checksummed
  // metadata) are indexed directly: HDF5 rejects their corruption itself.
  if (const int version = superblock_version(path); version >= 0 && version < 2) {
    probe_in_child(version);
  }
  index();
}

void RecordReader::Impl::probe_in_child(int version) const {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) fail("", fmt::format("cannot fork to check the file: {}", std::strerror(errno)));
  if (pid == 0) {
    try {
      Impl probe;
      probe.path = path;
      probe.index();
    } catch (...) {
      // An error is reported again, with its message, when the parent indexes the file.
    }
    ::_exit(0);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("", fmt::format("waitpid: {}", std::strerror(errno)));
  }
  if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0)) {
    const std::string how = WIFSIGNALED(status)
                                ? fmt::format("signal {}, {}", WTERMSIG(status),
                                              ::strsignal(WTERMSIG(status)))
                                : fmt::format("exit {}", WEXITSTATUS(status));
    fail("", fmt::format("corrupt HDF5 metadata: the HDF5 library crashed ({}) reading this file "
                         "of the earliest HDF5 format (superblock version {}, no metadata "
                         "checksums); rewrite it with h5py's libver=\"latest\" or regenerate it",
                         how, version));
  }
}

void RecordReader::Impl::index() {
  file = h5::File::open_read(path);  // HDF5 names truncation and checksum errors itself

  h5::Group root = file.root();
  std::optional<h5::Link> steps_link;
  for (const h5::Link& link : root.links()) {
    if (link.name == "steps") {
      steps_link = link;
    }
  }
  if (!steps_link) {
    fail("", "no /steps group (not a step record)");
  }
  require(root, *steps_link, H5I_GROUP);
  if (root.has_attribute(kSchemaVersionAttr)) {
    const AttrValue v = read_attr(root, kSchemaVersionAttr);
    const int64_t* version = std::get_if<int64_t>(&v);
    if (version == nullptr || *version < 1 || *version > kSchemaVersion) {
      fail("/", fmt::format("attribute '{}' must be an integer in [1, {}] (this build reads "
                            "record versions up to {})",
                            kSchemaVersionAttr, kSchemaVersion, kSchemaVersion));
    }
    schema_version = *version;
  }
  h5::Group steps_group = root.open_group("steps");

  for (const h5::Link& step_link : steps_group.links()) {
    std::string object = steps_group.where().child(step_link.name).path;
    std::optional<int> s = parse_step_group_name(step_link.name);
    if (!s) {
      fail(object, "step group name must be 6 digits (e.g. 000001)");
    }
    require(steps_group, step_link, H5I_GROUP);
    h5::Group step_group = steps_group.open_group(step_link.name);
    StepIndex si;
    si.groups.resize(record_groups().size());
    for (const h5::Link& group_link : step_group.links()) {
      int gi = group_index(group_link.name);
      if (gi < 0) {
        fail(step_group.where().child(group_link.name).path,
             fmt::format("unknown group (a step holds only {})", fmt::join(record_groups(), ", ")));
      }
      require(step_group, group_link, H5I_GROUP);
      si.groups[static_cast<size_t>(gi)] = index_group(step_group.open_group(group_link.name));
    }
    steps.emplace(*s, std::move(si));
  }
}

RecordReader::RecordReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  h5::ErrorSilencer quiet;
  impl_->path = path;
  impl_->open();
  impl_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (impl_->fd >= 0 && ::fstat(impl_->fd, &st) == 0) {
    impl_->file_size = static_cast<uint64_t>(st.st_size);
    ::posix_fadvise(impl_->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
}

RecordReader::~RecordReader() {
  h5::ErrorSilencer quiet;
  impl_.reset();
}

RecordReader::RecordReader(RecordReader&&) noexcept = default;

const std::string& RecordReader::path() const { return impl_->path; }

AttrMap RecordReader::attrs() const {
  h5::ErrorSilencer quiet;
  return read_attrs(impl_->file.root());
}

AttrMap RecordReader::step_attrs(int step) const {
  h5::ErrorSilencer quiet;
  impl_->step(step);
  return read_attrs(impl_->file.root().open_group("steps/" + step_group_name(step)));
}

std::vector<int> RecordReader::steps() const {
  std::vector<int> out;
  for (const auto& [s, _] : impl_->steps) {
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> RecordReader::groups(int step) const {
  const StepIndex& si = impl_->step(step);
  std::vector<std::string> out;
  for (size_t i = 0; i < si.groups.size(); ++i) {
    if (si.groups[i]) {
      out.push_back(record_groups()[i]);
    }
  }
  return out;
}

std::vector<std::string> RecordReader::names(int step, const std::string& group) const {
  return impl_->group(step, group).names;
}

TensorData RecordReader::describe(int step, const std::string& group,
                                  const std::string& name) const {
  const TensorInfo& i = impl_->desc(step, group, name);
  TensorData t;
  t.name = name;
  t.dtype = i.dtype;
  t.shape = i.shape;
  return t;
}

const TensorInfo& RecordReader::info(int step, const std::string& group,
                                     const std::string& name) const {
  return impl_->desc(step, group, name);
}

int64_t RecordReader::schema_version() const { return impl_->schema_version; }

TensorData RecordReader::read(int step, const std::string& group, const std::string& name) const {
  h5::ErrorSilencer quiet;
  const TensorInfo& info = impl_->desc(step, group, name);
  const std::string object = "/" + Impl::dataset_path(step, group, name);
  if (!info.stored) {
    impl_->fail(object, "holds only the tensor's digest (recorded with record = \"digest\"); "
                        "its values are not in the record (re-run with --dump-steps, or compare "
                        "with --localize)");
  }
  TensorData t = describe(step, group, name);
  // A corrupt or hostile record may declare any shape: refuse what cannot be allocated, with
  // the declared size, instead of failing in the allocator (or the OOM killer).
  const uint64_t bytes =
      static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(dtype_size(t.dtype));
  constexpr uint64_t kAlwaysAllocatable = uint64_t{64} << 20;
  if (bytes > kAlwaysAllocatable) {
    const uint64_t avail = available_memory_bytes();
    if (bytes > avail) {
      impl_->fail(object,
                  fmt::format("declares shape [{}] of {}: {:.3g} GiB, more than the {:.3g} GiB "
                              "of memory available",
                              fmt::join(t.shape, ", "), dtype_name(t.dtype),
                              static_cast<double>(bytes) / (1 << 30),
                              static_cast<double>(avail) / (1 << 30)));
    }
  }
  h5::Dataset ds = impl_->file.root().open_dataset(Impl::dataset_path(step, group, name));
  try {
    t.bytes.resize(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    impl_->fail(object, fmt::format("cannot allocate the {} bytes it declares", bytes));
  }
  if (!t.bytes.empty()) {
    ds.read(memory_type(t.dtype), t.bytes.data());
  }
  return t;
}

void RecordReader::read_bytes(int step, const std::string& group, const std::string& name,
                              uint64_t offset, size_t n, void* out) const {
  const TensorInfo& info = impl_->desc(step, group, name);
  const std::string object = "/" + Impl::dataset_path(step, group, name);
  const uint64_t total =
      static_cast<uint64_t>(info.numel()) * static_cast<uint64_t>(dtype_size(info.dtype));
  if (!info.stored) {
    impl_->fail(object, "holds only the tensor's digest; its bytes are not in the record");
  }
  if (offset > total || n > total - offset) {
    impl_->fail(object, fmt::format("bytes [{}, {}) are outside the tensor's {} bytes", offset,
                                    offset + n, total));
  }
  if (n == 0) return;
  if (!info.raw_offset || impl_->fd < 0) {
    const TensorData t = read(step, group, name);
    std::memcpy(out, t.bytes.data() + offset, n);
    return;
  }
  const uint64_t begin = *info.raw_offset + offset;
  if (begin + n > impl_->file_size) {
    impl_->fail(object, fmt::format("the data ends at byte {} of a file of {} bytes (truncated)",
                                    *info.raw_offset + total, impl_->file_size));
  }
  auto* p = static_cast<char*>(out);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(impl_->fd, p + done, n - done, static_cast<off_t>(begin + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      impl_->fail(object, fmt::format("cannot read bytes at offset {}: {}", begin + done,
                                      got < 0 ? std::strerror(errno) : "unexpected end of file"));
    }
    done += static_cast<size_t>(got);
  }
}

}  // namespace mtp::record
