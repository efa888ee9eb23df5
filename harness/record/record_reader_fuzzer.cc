// libFuzzer target for RecordReader (ci/sanitize.sh runs it from the seed corpus in
// fuzz_corpus/record_reader_fuzzer/, written by record_fuzz_seeds). The input is a whole file:
// it is opened as a record, and everything a command reads (attributes, steps, groups, names,
// shapes, the data of tensors up to 1 Mi elements) is read. Every input must either read or
// throw RecordError; any other exception, a crash or a sanitizer report is a finding.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness/record/record.h"

namespace {

/// The file that holds the current input: one per process, in /dev/shm when there is one
/// (HDF5 needs a real path: it resolves symlinks, so a memfd's /proc/self/fd/N does not open).
struct InputFile {
  std::string path;
  int fd = -1;
  InputFile() {
    const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path = std::string(dir) + "/record_reader_fuzzer_XXXXXX";
    fd = ::mkstemp(path.data());
    if (fd < 0) std::abort();
  }
  ~InputFile() { ::unlink(path.c_str()); }
  void put(const uint8_t* data, size_t size) const {
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
      std::abort();
    }
  }
};

void read_everything(const mtp::record::RecordReader& r) {
  r.attrs();
  for (int step : r.steps()) {
    r.step_attrs(step);
    for (const auto& group : r.groups(step)) {
      for (const auto& name : r.names(step, group)) {
        const auto t = r.describe(step, group, name);
        if (t.numel() <= (int64_t{1} << 20)) {
          const auto full = r.read(step, group, name);
          if (full.bytes.size() !=
              static_cast<size_t>(t.numel()) * mtp::record::dtype_size(t.dtype)) {
            std::abort();
          }
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const InputFile input;
  input.put(data, size);
  try {
    read_everything(mtp::record::RecordReader(input.path));
  } catch (const mtp::record::RecordError&) {
  }
  return 0;
}
