#include "harness/record/h5.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "harness/record/record.h"

namespace mtp::record::h5 {
namespace {

herr_t collect_innermost(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (out->empty() && err != nullptr && err->desc != nullptr && err->desc[0] != '\0') {
    *out = err->desc;
  }
  return 0;
}

/// Returns `id` or throws with `what` when HDF5 returned a negative value.
template <typename T>
T check(T id, const Where& where, const std::string& what) {
  if (id < 0) {
    fail(where, what);
  }
  return id;
}

struct LinkCollector {
  std::vector<Link> links;
};

herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* data) {
  auto* out = static_cast<LinkCollector*>(data);
  out->links.push_back(Link{name, info->type});
  return 0;
}

herr_t collect_attr_name(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

}  // namespace

// ---- errors ----

ErrorSilencer::ErrorSilencer() {
  static const bool no_exit_cleanup = H5dont_atexit() >= 0;  // before HDF5 initialises
  (void)no_exit_cleanup;
  thread_local bool default_printer_off = false;
  if (!default_printer_off) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    default_printer_off = true;
  }
  saved_ = H5Eget_auto2(H5E_DEFAULT, &func_, &data_) >= 0;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

ErrorSilencer::~ErrorSilencer() {
  if (saved_) {
    H5Eset_auto2(H5E_DEFAULT, func_, data_);
  }
}

Where Where::child(const std::string& name) const {
  return Where{file, path == "/" ? "/" + name : path + "/" + name};
}

std::string take_error_message() {
  std::string msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_innermost, &msg);
  H5Eclear2(H5E_DEFAULT);
  return msg;
}

void fail(const Where& where, const std::string& what) {
  std::string detail = take_error_message();
  std::string msg = where.path.empty() ? fmt::format("{}: {}", where.file, what)
                                       : fmt::format("{}: {}: {}", where.file, where.path, what);
  if (!detail.empty()) {
    std::replace(detail.begin(), detail.end(), '\n', ' ');  // HDF5's I/O errors embed ctime()
    msg += fmt::format(" (HDF5: {})", detail);
  }
  throw RecordError(msg);
}

// ---- Handle ----

Handle::Handle(hid_t id, Closer closer, Where where)
    : id_(id), closer_(closer), where_(std::move(where)) {}

Handle::~Handle() { reset(); }

Handle::Handle(Handle&& other) noexcept
    : id_(std::exchange(other.id_, H5I_INVALID_HID)),
      closer_(other.closer_),
      where_(std::move(other.where_)) {}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
    closer_ = other.closer_;
    where_ = std::move(other.where_);
  }
  return *this;
}

void Handle::reset() noexcept {
  if (id_ >= 0 && closer_ != nullptr) {
    if (closer_(id_) < 0) {
      H5Eclear2(H5E_DEFAULT);
    }
  }
  id_ = H5I_INVALID_HID;
}

void Handle::close() {
  if (id_ < 0) {
    return;
  }
  hid_t id = std::exchange(id_, H5I_INVALID_HID);
  if (closer_ != nullptr && closer_(id) < 0) {
    fail(where_, "cannot close");
  }
}

// ---- PropList ----

namespace {

PropList make_plist(hid_t cls, const char* what) {
  Where w{"(property list)", what};
  return PropList(check(H5Pcreate(cls), w, "cannot create"), H5Pclose, w);
}

void set_group_props(const PropList& p) {
  check(H5Pset_link_creation_order(p.id(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
        p.where(), "cannot set link creation order");
  check(H5Pset_obj_track_times(p.id(), 0), p.where(), "cannot turn off timestamps");
  // Up to kMaxCompactLinks links stay in the group's object header (compact storage), whose
  // messages carry checksums in the 1.8 file format; a larger group moves to dense storage (a
  // fractal heap of names), which HDF5 1.10 may crash iterating when corrupted, so the reader
  // indexes a record holding one in a child process first (record_reader.cc). Compact storage
  // cannot hold more: each insertion scans the header (H5O__alloc), so writing n links costs
  // about n^3 — 1,000 links 1.4 s, 4,000 links 59 s, 16,000 (an MoE model of 1,024 experts) hours
  // — against 0.17 s for 16,000 dense links (HDF5 1.10.8, 2-core EPYC).
  constexpr unsigned kMaxCompactLinks = 256;
  check(H5Pset_link_phase_change(p.id(), kMaxCompactLinks, kMaxCompactLinks * 3 / 4), p.where(),
        "cannot set the link storage threshold");
}

}  // namespace

PropList PropList::file_create() {
  PropList p = make_plist(H5P_FILE_CREATE, "file creation");
  set_group_props(p);
  return p;
}

PropList PropList::file_access(bool create) {
  PropList p = make_plist(H5P_FILE_ACCESS, "file access");
  check(H5Pset_file_locking(p.id(), 1, 1), p.where(), "cannot set file locking");
  if (create) {
    check(H5Pset_libver_bounds(p.id(), H5F_LIBVER_V18, H5F_LIBVER_V18), p.where(),
          "cannot set the file format version");
  }
  return p;
}

PropList PropList::group_create() {
  PropList p = make_plist(H5P_GROUP_CREATE, "group creation");
  set_group_props(p);
  return p;
}

PropList PropList::dataset_create() {
  PropList p = make_plist(H5P_DATASET_CREATE, "dataset creation");
  check(H5Pset_obj_track_times(p.id(), 0), p.where(), "cannot turn off timestamps");
  check(H5Pset_fill_time(p.id(), H5D_FILL_TIME_NEVER), p.where(), "cannot set fill time");
  return p;
}

// ---- Type ----

Type Type::copy_of(hid_t predefined) {
  Where w{"(datatype)", "copy"};
  return Type(check(H5Tcopy(predefined), w, "cannot copy datatype"), H5Tclose, w);
}

Type Type::fixed_string(size_t size) {
  Type t = copy_of(H5T_C_S1);
  check(H5Tset_size(t.id(), size == 0 ? 1 : size), t.where(), "cannot set string size");
  check(H5Tset_strpad(t.id(), H5T_STR_NULLPAD), t.where(), "cannot set string padding");
  check(H5Tset_cset(t.id(), H5T_CSET_UTF8), t.where(), "cannot set string character set");
  return t;
}

H5T_class_t Type::type_class() const {
  H5T_class_t c = H5Tget_class(id());
  if (c == H5T_NO_CLASS) {
    fail(where(), "cannot get datatype class");
  }
  return c;
}

size_t Type::size() const {
  size_t s = H5Tget_size(id());
  if (s == 0) {
    fail(where(), "cannot get datatype size");
  }
  return s;
}

bool Type::equals(hid_t other) const {
  return check(H5Tequal(id(), other), where(), "cannot compare datatypes") > 0;
}

bool Type::is_variable_string() const {
  return check(H5Tis_variable_str(id()), where(), "cannot inspect string datatype") > 0;
}

std::string Type::describe() const {
  size_t bytes = size();
  switch (type_class()) {
    case H5T_INTEGER:
      return fmt::format("integer ({} bytes, {})", bytes,
                         H5Tget_sign(id()) == H5T_SGN_NONE ? "unsigned" : "signed");
    case H5T_FLOAT:
      return fmt::format("float ({} bytes)", bytes);
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "variable-length sequence";
    case H5T_REFERENCE:
      return "reference";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_TIME:
      return "time";
    default:
      return "unknown";
  }
}

// ---- DataSpace ----

DataSpace DataSpace::scalar() {
  Where w{"(dataspace)", "scalar"};
  return DataSpace(check(H5Screate(H5S_SCALAR), w, "cannot create"), H5Sclose, w);
}

DataSpace DataSpace::simple(const std::vector<hsize_t>& dims) {
  Where w{"(dataspace)", "simple"};
  hid_t id = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  return DataSpace(check(id, w, "cannot create"), H5Sclose, w);
}

DataSpace DataSpace::null() {
  Where w{"(dataspace)", "null"};
  return DataSpace(check(H5Screate(H5S_NULL), w, "cannot create"), H5Sclose, w);
}

H5S_class_t DataSpace::kind() const {
  H5S_class_t k = H5Sget_simple_extent_type(id());
  if (k == H5S_NO_CLASS) {
    fail(where(), "cannot get dataspace class");
  }
  return k;
}

std::vector<hsize_t> DataSpace::dims() const {
  int rank = check(H5Sget_simple_extent_ndims(id()), where(), "cannot get dataspace rank");
  std::vector<hsize_t> d(static_cast<size_t>(rank));
  if (rank > 0) {
    check(H5Sget_simple_extent_dims(id(), d.data(), nullptr), where(),
          "cannot get dataspace dimensions");
  }
  return d;
}

hssize_t DataSpace::num_points() const {
  return check(H5Sget_simple_extent_npoints(id()), where(), "cannot get element count");
}

// ---- Attribute ----

Type Attribute::type() const {
  return Type(check(H5Aget_type(id()), where(), "cannot get attribute type"), H5Tclose, where());
}

DataSpace Attribute::space() const {
  return DataSpace(check(H5Aget_space(id()), where(), "cannot get attribute dataspace"), H5Sclose,
                   where());
}

void Attribute::write(hid_t mem_type, const void* buf) const {
  check(H5Awrite(id(), mem_type, buf), where(), "cannot write attribute");
}

void Attribute::read(hid_t mem_type, void* buf) const {
  check(H5Aread(id(), mem_type, buf), where(), "cannot read attribute");
}

// ---- Object ----

namespace {

Where attr_where(const Where& obj, const std::string& name) {
  return Where{obj.file, obj.path + " attribute '" + name + "'"};
}

}  // namespace

bool Object::has_attribute(const std::string& name) const {
  return check(H5Aexists(id(), name.c_str()), attr_where(where(), name), "cannot check attribute") >
         0;
}

Attribute Object::open_attribute(const std::string& name) const {
  Where w = attr_where(where(), name);
  return Attribute(check(H5Aopen(id(), name.c_str(), H5P_DEFAULT), w, "cannot open attribute"),
                   H5Aclose, w);
}

Attribute Object::create_attribute(const std::string& name, const Type& type,
                                   const DataSpace& space) const {
  Where w = attr_where(where(), name);
  if (has_attribute(name)) {
    check(H5Adelete(id(), name.c_str()), w, "cannot replace attribute");
  }
  hid_t a = H5Acreate2(id(), name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT);
  return Attribute(check(a, w, "cannot create attribute"), H5Aclose, w);
}

std::vector<std::string> Object::attribute_names() const {
  std::vector<std::string> names;
  hsize_t idx = 0;
  check(H5Aiterate2(id(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr_name, &names), where(),
        "cannot list attributes");
  return names;
}

// ---- Group ----

Group Group::create_group(const std::string& name) const {
  Where w = where().child(name);
  PropList gcpl = PropList::group_create();
  hid_t g = H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, gcpl.id(), H5P_DEFAULT);
  return Group(check(g, w, "cannot create group"), H5Gclose, w);
}

Group Group::open_group(const std::string& name) const {
  Where w = where().child(name);
  return Group(check(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), w, "cannot open group"), H5Gclose,
               w);
}

Dataset Group::create_dataset(const std::string& name, hid_t type, const DataSpace& space) const {
  Where w = where().child(name);
  PropList dcpl = PropList::dataset_create();
  hid_t d = H5Dcreate2(id(), name.c_str(), type, space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT);
  return Dataset(check(d, w, "cannot create dataset"), H5Dclose, w);
}

Dataset Group::open_dataset(const std::string& name) const {
  Where w = where().child(name);
  return Dataset(check(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), w, "cannot open dataset"),
                 H5Dclose, w);
}

bool Group::has(const std::string& name) const {
  return check(H5Lexists(id(), name.c_str(), H5P_DEFAULT), where().child(name),
               "cannot check link") > 0;
}

std::vector<Link> Group::links() const {
  LinkCollector out;
  hsize_t idx = 0;
  if (H5Literate(id(), H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, collect_link, &out) >= 0) {
    return std::move(out.links);
  }
  // Written without a creation-order index (e.g. by h5py without track_order): name order.
  H5Eclear2(H5E_DEFAULT);
  out.links.clear();
  idx = 0;
  check(H5Literate(id(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect_link, &out), where(),
        "cannot list group");
  return std::move(out.links);
}

bool Group::has_dense_links() const {
  H5G_info_t info;
  check(H5Gget_info(id(), &info), where(), "cannot read group info");
  return info.storage_type == H5G_STORAGE_TYPE_DENSE;
}

H5I_type_t Group::kind_of(const std::string& name) const {
  Where w = where().child(name);
  Handle obj(check(H5Oopen(id(), name.c_str(), H5P_DEFAULT), w, "cannot open object"), H5Oclose, w);
  H5I_type_t t = H5Iget_type(obj.id());
  if (t == H5I_BADID) {
    fail(w, "cannot get object type");
  }
  return t;
}

// ---- Dataset ----

Type Dataset::type() const {
  return Type(check(H5Dget_type(id()), where(), "cannot get dataset type"), H5Tclose, where());
}

DataSpace Dataset::space() const {
  return DataSpace(check(H5Dget_space(id()), where(), "cannot get dataset dataspace"), H5Sclose,
                   where());
}

void Dataset::write(hid_t mem_type, const void* buf) const {
  check(H5Dwrite(id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), where(),
        "cannot write dataset");
}

void Dataset::read(hid_t mem_type, void* buf) const {
  check(H5Dread(id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), where(),
        "cannot read dataset");
}

std::optional<uint64_t> Dataset::raw_offset() const {
  // HDF5 gives an offset only for contiguous storage, which cannot carry filters; chunked and
  // compact datasets (and unallocated ones) answer HADDR_UNDEF.
  const haddr_t offset = H5Dget_offset(id());
  if (offset == HADDR_UNDEF) {
    take_error_message();  // not allocated: no error worth keeping
    return std::nullopt;
  }
  return static_cast<uint64_t>(offset);
}

// ---- File ----

File File::create(const std::string& path) {
  PropList fcpl = PropList::file_create();
  PropList fapl = PropList::file_access(/*create=*/true);
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_EXCL, fcpl.id(), fapl.id());
  return File(check(f, Where{path, ""}, "cannot create HDF5 file"), H5Fclose, Where{path, "/"});
}

File File::open_read(const std::string& path) {
  PropList fapl = PropList::file_access(/*create=*/false);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.id());
  return File(check(f, Where{path, ""}, "cannot open as HDF5"), H5Fclose, Where{path, "/"});
}

Group File::root() const {
  return Group(check(H5Gopen2(id(), "/", H5P_DEFAULT), where(), "cannot open root group"), H5Gclose,
               where());
}

}  // namespace mtp::record::h5

namespace mtp::record {

std::string hdf5_library_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace mtp::record
