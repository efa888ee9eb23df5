// File: harness/record/h5.h
//
// A thin RAII wrapper over the HDF5 C API, shaped like HighFive: File, Group, Dataset, Attribute,
// DataSpace, Type and PropList handles close themselves in their destructors, and every failure
// throws RecordError naming the file, the object path and HDF5's own innermost message.
// Internal to harness_record (it exposes <hdf5.h>); other modules use record.h.
//
// Every public entry point of record/ holds an ErrorSilencer, so HDF5 never prints its error
// stack to stderr; the stack is read into the exception message instead.
//
// Objects are created the way the step record needs them (record.h): no timestamps, link
// creation order tracked and indexed on every group, so equal content gives equal bytes and
// links are listed in the order they were written.
//
// Example:
//   h5::ErrorSilencer quiet;
//   h5::File f = h5::File::open_read("run.h5");
//   h5::Group steps = f.root().open_group("steps");
//   for (const h5::Link& l : steps.links()) { ... }
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mtp::record::h5 {

/// ErrorSilencer: turns off HDF5's automatic error printing on this thread while alive and
/// restores the previous handler afterwards (guards nest). The first guard on a thread also turns
/// HDF5's built-in printer off for good: record/ reports every failure through RecordError, and
/// HDF5 1.10.8 leaks internal state after a metadata checksum error, which makes it print
/// "HDF5: infinite loop closing library" at exit whenever printing is on.
/// The first guard of the process (before HDF5 initialises) also calls H5dont_atexit(): when
/// H5Fclose fails (a full disk while flushing), HDF5 1.10 keeps the file's id but has freed
/// part of the file, and its exit-time cleanup closes it again and crashes (SIGSEGV after the
/// error was reported). Every handle of record/ is closed by its owner, so nothing needs that
/// cleanup.
class ErrorSilencer {
 public:
  ErrorSilencer();
  ~ErrorSilencer();
  ErrorSilencer(const ErrorSilencer&) = delete;
  ErrorSilencer& operator=(const ErrorSilencer&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
  bool saved_ = false;
};

/// Where: the file and object path of a handle, for error messages.
struct Where {
  std::string file;
  std::string path = "/";  ///< empty: the file itself
  /// The path of child `name` ("/steps" + "000001" → "/steps/000001").
  Where child(const std::string& name) const;
};

/// take_error_message: the innermost description on this thread's HDF5 error stack (e.g.
/// "truncated file: eof = 96, ..."), or "" when the stack is empty. Clears the stack.
std::string take_error_message();

/// fail: throws RecordError "<file>: <path>: <what> (HDF5: <innermost message>)" ("<file>: <what>
/// (...)" when the path is empty: the file itself).
[[noreturn]] void fail(const Where& where, const std::string& what);

/// Handle: an HDF5 identifier with the function that closes it. Move-only.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer, Where where);
  ~Handle();
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }
  const Where& where() const { return where_; }
  /// Closes now (no-op when not valid); throws RecordError if HDF5 reports an error.
  void close();

 private:
  void reset() noexcept;

  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
  Where where_;
};

/// PropList: a property list with the settings the step record needs.
class PropList : public Handle {
 public:
  using Handle::Handle;
  /// File creation: root group tracks and indexes link creation order, no timestamps.
  static PropList file_create();
  /// File access: default driver; file locking ignored where the file system lacks it. For
  /// `create`, the HDF5 1.8 file format (superblock v2, object header v2), whose metadata blocks
  /// all carry checksums: a corrupted record is rejected instead of being parsed.
  static PropList file_access(bool create);
  /// Group creation: link creation order tracked and indexed, no timestamps.
  static PropList group_create();
  /// Dataset creation: contiguous, no timestamps, no fill value written.
  static PropList dataset_create();
};

/// Type: a datatype (a copy, owned; predefined types are passed as plain hid_t).
class Type : public Handle {
 public:
  using Handle::Handle;
  /// A copy of a predefined type such as H5T_STD_I64LE.
  static Type copy_of(hid_t predefined);
  /// A fixed-length UTF-8 string type of `size` bytes (at least 1), null padded.
  static Type fixed_string(size_t size);

  H5T_class_t type_class() const;
  size_t size() const;
  /// True iff this type is the same as `other` (H5Tequal).
  bool equals(hid_t other) const;
  bool is_variable_string() const;
  /// "integer (4 bytes, signed)", "float (2 bytes)", "string", ... for messages.
  std::string describe() const;
};

/// DataSpace: the shape of a dataset or attribute.
class DataSpace : public Handle {
 public:
  using Handle::Handle;
  static DataSpace scalar();
  static DataSpace simple(const std::vector<hsize_t>& dims);
  /// A null dataspace (no elements, no shape): a digest-only dataset of the record.
  static DataSpace null();
  /// H5S_SCALAR, H5S_SIMPLE or H5S_NULL.
  H5S_class_t kind() const;
  /// Dimensions (empty for a scalar).
  std::vector<hsize_t> dims() const;
  /// Number of elements (1 for a scalar, 0 for a null space).
  hssize_t num_points() const;
};

/// Attribute: one attribute of a group or dataset.
class Attribute : public Handle {
 public:
  using Handle::Handle;
  Type type() const;
  DataSpace space() const;
  void write(hid_t mem_type, const void* buf) const;
  void read(hid_t mem_type, void* buf) const;
};

/// Object: what groups and datasets share (attributes).
class Object : public Handle {
 public:
  using Handle::Handle;
  bool has_attribute(const std::string& name) const;
  Attribute open_attribute(const std::string& name) const;
  /// Creates attribute `name`, deleting an existing one of that name first.
  Attribute create_attribute(const std::string& name, const Type& type,
                             const DataSpace& space) const;
  /// Attribute names in name order.
  std::vector<std::string> attribute_names() const;
};

class Dataset;

/// Link: one entry of a group.
struct Link {
  std::string name;
  H5L_type_t type = H5L_TYPE_HARD;  ///< hard, soft or external
};

/// Group: a group (the root group included).
class Group : public Object {
 public:
  using Object::Object;
  /// Creates child group `name` (creation order tracked and indexed, no timestamps).
  Group create_group(const std::string& name) const;
  Group open_group(const std::string& name) const;
  /// Creates dataset `name` with file type `type` and shape `space` (no timestamps).
  Dataset create_dataset(const std::string& name, hid_t type, const DataSpace& space) const;
  Dataset open_dataset(const std::string& name) const;
  /// True iff a link `name` exists in this group.
  bool has(const std::string& name) const;
  /// Links in creation order (name order for groups written without a creation-order index).
  std::vector<Link> links() const;
  /// True iff the group keeps its links in dense storage (a fractal heap of names and B-trees)
  /// rather than in its checksummed object header (compact storage); read from the header.
  bool has_dense_links() const;
  /// What hard link `name` points to: H5I_GROUP, H5I_DATASET, H5I_DATATYPE.
  H5I_type_t kind_of(const std::string& name) const;
};

/// Dataset: an n-dimensional array of one type.
class Dataset : public Object {
 public:
  using Object::Object;
  Type type() const;
  DataSpace space() const;
  /// Writes the whole dataset from `buf`, converting from `mem_type`.
  void write(hid_t mem_type, const void* buf) const;
  /// Reads the whole dataset into `buf`, converting to `mem_type`.
  void read(hid_t mem_type, void* buf) const;
  /// The file offset of the dataset's raw data when the bytes can be read from the file
  /// directly: contiguous layout (which has no filters), storage allocated. nullopt otherwise.
  std::optional<uint64_t> raw_offset() const;
};

/// File: an open HDF5 file.
class File : public Handle {
 public:
  using Handle::Handle;
  /// Creates `path` for writing, exclusively: fails when anything (a file, a symlink) exists
  /// under that name, so no existing file is truncated and no link is followed.
  static File create(const std::string& path);
  /// Opens `path` read-only.
  static File open_read(const std::string& path);
  /// The root group "/".
  Group root() const;
};

}  // namespace mtp::record::h5
