// File: harness/common/output_file.h
//
// Output files that never lie: every output is checked before any work is done
// (check_output_file, check_output_directory) and written through a TempFile (temp_file.h):
// unique temporary created exclusively in the destination directory, every byte written and
// checked, fsync'ed, closed, renamed. A failure leaves nothing under the final name.
//
// Example:
//   check_output_file("--json", json_path);          // before training: exit 2 on a bad path
//   ...
//   write_file_atomically(json_path, report.dump(2));  // InfraError on a full disk
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mtp {

/// Throws InputError "<what> <path>: <problem>" unless an output file can be written at `path`:
/// not empty, not naming a directory or an existing file that is not a regular file (a device
/// such as /dev/full, a FIFO, a socket), with a name short enough for its temporary
/// (`<name>.tmp-<pid>-<random>` within the file system's 255 bytes), and in an existing
/// directory where this process can create files (checked by creating and removing a temporary
/// there, so permissions and read-only file systems are caught before any work is done).
void check_output_file(const std::string& what, const std::string& path);

/// Throws InputError "<what> <path>: is <other_what> <other>: an output must not overwrite an
/// input or another output" when `path` and `other` name the same file: the same inode when
/// both exist (hard and symbolic links, "..", "./" spellings included), else the same resolved
/// directory and name. Empty paths never match.
void check_not_same_file(const std::string& what, const std::string& path,
                         const std::string& other_what, const std::string& other);

/// Every file one command reads and writes, checked against each other before any work is done:
/// an output must not name an input or another output (check_not_same_file: the same inode, or
/// the same resolved name), and each output must be writable (check_output_file). Register
/// defaults too (a report path derived from another): a collision with a default is named as
/// such. Example (check):
///   FileRoles files;
///   files.input("the scenario", scenario_path);
///   files.output("--json", json_path);
///   files.output("--html (default: the --json path with .html)", html_path);  // throws on --json
///   X.html
class FileRoles {
 public:
  /// Records an input; throws InputError when an output registered earlier names the same
  /// file. An empty path is ignored.
  void input(const std::string& what, const std::string& path);
  /// Throws InputError when an input or an output registered earlier names the same file, then
  /// checks check_output_file(what, path). An empty path is ignored.
  void output(const std::string& what, const std::string& path);
  /// As output(), without check_output_file: for an output whose directory is made later (its
  /// writability is checked then).
  void planned_output(const std::string& what, const std::string& path);
  /// Records an output directory: check_output_directory (creates it) is not called here; an
  /// input inside it is allowed (a check's run directory holds no inputs it overwrites except
  /// the outputs registered one by one). Throws InputError when an input or output registered
  /// earlier *is* this directory.
  void output_directory(const std::string& what, const std::string& dir);

 private:
  struct Entry {
    std::string what, path;
    bool is_output;
  };
  std::vector<Entry> entries_;
};

/// Creates `dir` (and its parents) when missing and checks, as check_output_file does, that
/// files can be created in it. Throws InputError "<what> <dir>: <problem>".
void check_output_directory(const std::string& what, const std::string& dir);

/// Writes `content` to `path` through a TempFile: every byte written, fsync, close (each
/// checked), rename. Throws InfraError naming the path and the system error on any failure;
/// nothing is then left under either name.
void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace mtp
