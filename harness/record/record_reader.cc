// RecordReader: opens a step record, checks its schema once and indexes every dataset's dtype and
// shape, so listing and describe() need no further I/O (record.h).

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/common/json_input.h"
#include "harness/common/system_memory.h"
#include "harness/common/utf8.h"

#include "harness/record/h5.h"
#include "harness/record/h5_attr.h"
#include "harness/record/h5_dtype.h"
#include "harness/record/record.h"
#include "harness/record/schema.h"

namespace mtp::record {
namespace {

/// What opening a dataset tells beyond the index: its block digests and raw offset.
struct Details {
  std::optional<TensorDigest> digest;  ///< nullopt for version-1 records
  std::optional<uint64_t> raw_offset;
};

struct Entry {
  TensorInfo info;
  /// Filled when the dataset is opened: at once without a tensor index, lazily with one.
  mutable std::optional<Details> details;
};

struct GroupIndex {
  std::vector<std::string> names;                  ///< creation order
  std::unordered_map<std::string, Entry> entries;  ///< by name
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
  int fd = -1;  // for read_bytes (pread) and mapped_bytes; opened after the schema check
  uint64_t file_size = 0;
  mutable void* map = nullptr;  // mapped_bytes' map of the whole file (under `lazy`)
  ~Impl() {
    if (map != nullptr) ::munmap(map, file_size);
    if (fd >= 0) ::close(fd);
  }
  std::map<int, StepIndex> steps;
  /// Set once index() has run in a child process without crashing (probe_in_child): links in
  /// dense storage may then be iterated here.
  bool probed = false;
  /// Thrown by links_of when a group in dense storage is met before the child probe.
  struct DenseLinksMet {};

  [[noreturn]] void fail(const std::string& object, const std::string& what) const {
    if (object.empty()) {
      throw RecordError(fmt::format("{}: {}", path, what));
    }
    throw RecordError(fmt::format("{}: {}: {}", path, object, what));
  }

  void open();
  void index();  // reads /steps and every group's dataset list
  /// index() in a child process; a crash there is bad input ("corrupt HDF5 metadata: ...",
  /// naming `why` the file needed it). Sets `probed` when the child indexed the file.
  void probe_in_child(const std::string& why);
  /// g.links(); throws DenseLinksMet for a group in dense storage unless `probed`.
  std::vector<h5::Link> links_of(const h5::Group& g) const;
  void require(const h5::Group& parent, const h5::Link& link, H5I_type_t want) const;
  GroupIndex index_group(const h5::Group& g) const;
  /// The group's entries from its tensor_index attribute (checked against its links).
  void read_tensor_index(const h5::Group& g, GroupIndex& gi) const;
  std::pair<TensorInfo, Details> describe_dataset(const h5::Dataset& ds) const;
  std::optional<TensorDigest> read_digest(const h5::Dataset& ds, int64_t numel) const;
  /// The dataset's details, opening it (once) and checking it against the index.
  const Details& details(int s, const std::string& g, const std::string& name) const;
  int64_t schema_version = 1;
  mutable std::mutex lazy;  // guards Entry::details (read_bytes runs on several threads)

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

  const Entry& entry(int s, const std::string& g, const std::string& name) const {
    const GroupIndex& gi = group(s, g);
    auto it = gi.entries.find(name);
    if (it == gi.entries.end()) {
      fail("", fmt::format("no dataset '{}' in step {} group '{}'", name, s, g));
    }
    return it->second;
  }
  const TensorInfo& desc(int s, const std::string& g, const std::string& name) const {
    return entry(s, g, name).info;
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
    if (has_blocks)
      fail(ds.where().path, fmt::format("has '{}' without '{}'", kBlockDigestsAttr, kDigestAttr));
    return std::nullopt;
  }
  TensorDigest d;
  const std::string hex = read_string_attr(ds, kDigestAttr);
  const std::optional<Digest128> whole = Digest128::parse_hex(hex);
  if (!whole) {
    fail(ds.where().path,
         fmt::format("attribute '{}' is \"{}\", not 32 hex digits", kDigestAttr, printable(hex)));
  }
  d.whole = *whole;
  if (has_blocks) {
    const std::vector<uint64_t> halves = read_u64_matrix_attr(ds, kBlockDigestsAttr, 2);
    for (size_t i = 0; i + 1 < halves.size(); i += 2)
      d.blocks.push_back({halves[i], halves[i + 1]});
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

std::pair<TensorInfo, Details> RecordReader::Impl::describe_dataset(const h5::Dataset& ds) const {
  TensorInfo t;
  Details details;
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
  details.digest = read_digest(ds, static_cast<int64_t>(numel));
  if (schema_version >= 2 && !details.digest) {
    fail(ds.where().path, fmt::format("has no '{}' attribute (a record of schema version {} "
                                      "digests every tensor)",
                                      kDigestAttr, schema_version));
  }
  if (details.digest) t.digest = details.digest->whole;
  if (t.stored && numel > 0 && ds.type().equals(memory_type(t.dtype))) {
    details.raw_offset = ds.raw_offset();
  }
  return {t, details};
}

void RecordReader::Impl::read_tensor_index(const h5::Group& g, GroupIndex& gi) const {
  const std::string where = g.where().path;
  const std::string text = read_string_attr(g, kTensorIndexAttr);
  nlohmann::json index;
  try {
    index = parse_json(text, fmt::format("attribute '{}'", kTensorIndexAttr));
  } catch (const InputError& e) {
    fail(where, e.what());
  }
  auto bad = [&](size_t i, const std::string& why) {
    fail(where, fmt::format("attribute '{}' entry {}: {}", kTensorIndexAttr, i, why));
  };
  if (!index.is_array())
    fail(where, fmt::format("attribute '{}' is not a JSON array", kTensorIndexAttr));
  if (index.size() != gi.names.size()) {
    fail(where, fmt::format("attribute '{}' lists {} tensors but the group holds {} datasets",
                            kTensorIndexAttr, index.size(), gi.names.size()));
  }
  for (size_t i = 0; i < index.size(); ++i) {
    const nlohmann::json& e = index[i];
    if (!e.is_array() || e.size() != 5 || !e[0].is_string() || !e[1].is_string() ||
        !e[2].is_array() || !e[3].is_string() || !e[4].is_string()) {
      bad(i, "expected [name, dtype, [shape...], storage, digest]");
    }
    const std::string name = e[0].get<std::string>();
    if (name != gi.names[i]) {
      bad(i, fmt::format("names \"{}\" where the group's dataset {} is \"{}\"", printable(name), i,
                         printable(gi.names[i])));
    }
    Entry entry;
    try {
      entry.info.dtype = parse_dtype(e[1].get<std::string>());
    } catch (const InputError&) {
      bad(i, fmt::format("unknown dtype \"{}\"", printable(e[1].get<std::string>())));
    }
    uint64_t numel = 1;
    const uint64_t max_elems = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
                               static_cast<uint64_t>(dtype_size(entry.info.dtype));
    for (const auto& d : e[2]) {
      if (!d.is_number_unsigned()) bad(i, "a dimension is not a non-negative integer");
      const uint64_t u = d.get<uint64_t>();
      if (u > (uint64_t{1} << 62) || (u != 0 && numel > max_elems / u)) bad(i, "is too large");
      numel *= u;
      entry.info.shape.push_back(static_cast<int64_t>(u));
    }
    const std::string storage = e[3].get<std::string>();
    if (storage != storage_name(Storage::kFull) && storage != storage_name(Storage::kDigest)) {
      bad(i, fmt::format("storage \"{}\" is neither \"full\" nor \"digest\"", printable(storage)));
    }
    entry.info.stored = storage == storage_name(Storage::kFull);
    entry.info.digest = Digest128::parse_hex(e[4].get<std::string>());
    if (!entry.info.digest) bad(i, "the digest is not 32 hex digits");
    gi.entries.emplace(name, std::move(entry));
  }
}

const Details& RecordReader::Impl::details(int s, const std::string& g,
                                           const std::string& name) const {
  const Entry& e = entry(s, g, name);
  std::lock_guard<std::mutex> lock(lazy);
  if (e.details) return *e.details;
  const std::string object = "/" + dataset_path(s, g, name);
  h5::Group parent = file.root().open_group(fmt::format("steps/{}/{}", step_group_name(s), g));
  if (parent.kind_of(name) != H5I_DATASET) fail(object, "is not a dataset");
  auto [info, details] = describe_dataset(parent.open_dataset(name));
  const TensorInfo& want = e.info;
  if (info.dtype != want.dtype || info.shape != want.shape || info.stored != want.stored ||
      info.digest != want.digest) {
    fail(object, fmt::format("disagrees with the group's '{}' attribute (dtype, shape, storage "
                             "or digest): a corrupt or hand-edited record",
                             kTensorIndexAttr));
  }
  e.details = details;
  return *e.details;
}

GroupIndex RecordReader::Impl::index_group(const h5::Group& g) const {
  GroupIndex gi;
  const std::vector<h5::Link> links = links_of(g);
  for (const h5::Link& link : links) {
    if (!is_valid_utf8(link.name)) {
      // Names go into JSON reports, which hold only UTF-8.
      fail(printable(g.where().child(link.name).path), "dataset name is not valid UTF-8");
    }
    if (link.type != H5L_TYPE_HARD) {
      fail(g.where().child(link.name).path,
           fmt::format("is {}; a record holds only groups and datasets", link_kind(link.type)));
    }
    gi.names.push_back(link.name);
  }
  if (g.has_attribute(kTensorIndexAttr)) {
    read_tensor_index(g, gi);  // each dataset is opened (and checked) when first needed
    return gi;
  }
  for (const h5::Link& link : links) {  // no index (version 1, foreign files): open each now
    require(g, link, H5I_DATASET);
    auto [info, details] = describe_dataset(g.open_dataset(link.name));
    gi.entries.emplace(link.name, Entry{info, details});
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
    probe_in_child(
        fmt::format("this file of the earliest HDF5 format (superblock version {}, no "
                    "metadata checksums); rewrite it with h5py's libver=\"latest\" or "
                    "regenerate it",
                    version));
  }
  // A group of more than 256 tensors keeps its names in a fractal heap (dense link storage,
  // h5.cc), which HDF5 1.10 may crash iterating when it is corrupted: such a file is indexed in a
  // child process first too.
  try {
    index();
  } catch (const DenseLinksMet&) {
    steps.clear();
    probe_in_child(
        "a group of this file that keeps its links in dense storage (a fractal heap, "
        "used for more than 256 tensors per group)");
    index();
  }
}

std::vector<h5::Link> RecordReader::Impl::links_of(const h5::Group& g) const {
  if (!probed && g.has_dense_links()) throw DenseLinksMet{};
  return g.links();
}

void RecordReader::Impl::probe_in_child(const std::string& why) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) fail("", fmt::format("cannot fork to check the file: {}", std::strerror(errno)));
  if (pid == 0) {
    try {
      Impl probe;
      probe.path = path;
      probe.probed = true;
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
    const std::string how = WIFSIGNALED(status) ? fmt::format("signal {}, {}", WTERMSIG(status),
                                                              ::strsignal(WTERMSIG(status)))
                                                : fmt::format("exit {}", WEXITSTATUS(status));
    fail("",
         fmt::format("corrupt HDF5 metadata: the HDF5 library crashed ({}) reading {}", how, why));
  }
  probed = true;
}

void RecordReader::Impl::index() {
  file = h5::File::open_read(path);  // HDF5 names truncation and checksum errors itself

  h5::Group root = file.root();
  std::optional<h5::Link> steps_link;
  for (const h5::Link& link : links_of(root)) {
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

  for (const h5::Link& step_link : links_of(steps_group)) {
    std::string object = steps_group.where().child(step_link.name).path;
    std::optional<int> s = parse_step_group_name(step_link.name);
    if (!s) {
      fail(object, "step group name must be 6 digits (e.g. 000001)");
    }
    require(steps_group, step_link, H5I_GROUP);
    h5::Group step_group = steps_group.open_group(step_link.name);
    StepIndex si;
    si.groups.resize(record_groups().size());
    for (const h5::Link& group_link : links_of(step_group)) {
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

bool RecordReader::has_group(int step, Group group) const {
  const StepIndex& si = impl_->step(step);
  const size_t i = static_cast<size_t>(group);
  return i < si.groups.size() && si.groups[i].has_value();
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

const TensorInfo& RecordReader::verified_info(int step, const std::string& group,
                                              const std::string& name) const {
  h5::ErrorSilencer quiet;
  (void)impl_->details(step, group, name);
  return info(step, group, name);
}

TensorDigest RecordReader::block_digests(int step, const std::string& group,
                                         const std::string& name) const {
  h5::ErrorSilencer quiet;
  const Details& d = impl_->details(step, group, name);
  if (!d.digest) {
    impl_->fail("/" + Impl::dataset_path(step, group, name),
                "carries no digests (a record of schema version 1)");
  }
  return *d.digest;
}

std::optional<uint64_t> RecordReader::raw_offset(int step, const std::string& group,
                                                 const std::string& name) const {
  h5::ErrorSilencer quiet;
  return impl_->details(step, group, name).raw_offset;
}

int64_t RecordReader::schema_version() const { return impl_->schema_version; }

std::optional<NonFiniteValue> RecordReader::first_nonfinite() const {
  const AttrMap a = attrs();
  const auto it = a.find(kFirstNonFiniteAttr);
  if (it == a.end()) return std::nullopt;
  const auto* text = std::get_if<std::string>(&it->second);
  const std::string source =
      fmt::format("{}: root attribute '{}'", impl_->path, kFirstNonFiniteAttr);
  if (text == nullptr) {
    throw RecordError(
        fmt::format("{}: a number, not the JSON text the writer makes (step, group, "
                    "name, dtype, shape, count, index, bits, tensors)",
                    source));
  }
  return NonFiniteValue::from_json(*text, source);
}

TensorData RecordReader::read(int step, const std::string& group, const std::string& name) const {
  h5::ErrorSilencer quiet;
  const TensorInfo& info = impl_->desc(step, group, name);
  const std::string object = "/" + Impl::dataset_path(step, group, name);
  if (!info.stored) {
    impl_->fail(object,
                "holds only the tensor's digest (recorded with record = \"digest\"); "
                "its values are not in the record (re-run with --dump-steps, or compare "
                "with --localize)");
  }
  impl_->details(step, group, name);  // the dataset agrees with the index (its shape sizes `t`)
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
  const std::optional<uint64_t> raw = raw_offset(step, group, name);
  if (!raw || impl_->fd < 0) {
    const TensorData t = read(step, group, name);
    std::memcpy(out, t.bytes.data() + offset, n);
    return;
  }
  const uint64_t begin = *raw + offset;
  if (begin + n > impl_->file_size) {
    impl_->fail(object, fmt::format("the data ends at byte {} of a file of {} bytes (truncated)",
                                    *raw + total, impl_->file_size));
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

std::optional<std::pair<const uint8_t*, size_t>> RecordReader::mapped_bytes(
    int step, const std::string& group, const std::string& name) const {
  const TensorInfo& info = impl_->desc(step, group, name);
  if (!info.stored) return std::nullopt;
  const uint64_t total =
      static_cast<uint64_t>(info.numel()) * static_cast<uint64_t>(dtype_size(info.dtype));
  const std::optional<uint64_t> raw = raw_offset(step, group, name);
  if (!raw || impl_->fd < 0 || total == 0 || *raw > impl_->file_size ||
      total > impl_->file_size - *raw) {
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(impl_->lazy);
  if (impl_->map == nullptr) {
    void* m = ::mmap(nullptr, impl_->file_size, PROT_READ, MAP_SHARED, impl_->fd, 0);
    if (m == MAP_FAILED) return std::nullopt;
    ::madvise(m, impl_->file_size, MADV_SEQUENTIAL);
    impl_->map = m;
  }
  return std::make_pair(static_cast<const uint8_t*>(impl_->map) + *raw, static_cast<size_t>(total));
}

}  // namespace mtp::record
