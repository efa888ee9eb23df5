// libFuzzer target for replay's record-to-run reader, read_record_run (ci/sanitize.sh runs it
// from the seed corpus in fuzz_corpus/record_run_fuzzer/, written by record_run_fuzz_seeds).
// Input: either a whole HDF5 file (it starts with HDF5's signature), or a recipe
// (record_run_fuzz_recipe.h) written as a record first: harness and Megatron-LM records of a
// tiny model and broken ones (a scalar linear_fc2, P = 2^32 + 1, clip_grad NaN, V against the
// layout, a layer index of 2^63). The record is opened and read_record_run asked for step 1
// with and without the optimizer's hyperparameters required, and for steps 2–3. Every input
// must either give a run whose sizes hold and whose model validates (abort otherwise) or throw
// RecordError (or an InputError naming the record); any other exception, a crash or a sanitizer
// report is a finding.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "harness/common/error.h"
#include "harness/replay/record_run.h"
#include "harness/replay/record_run_fuzz_recipe.h"

namespace {

/// The file that holds the current record: one per process, in /dev/shm when there is one.
struct InputFile {
  std::string path;
  InputFile() {
    const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path = std::string(dir) + "/record_run_fuzzer_XXXXXX";
    const int fd = ::mkstemp(path.data());
    if (fd < 0) std::abort();
    ::close(fd);
  }
  ~InputFile() { ::unlink(path.c_str()); }
  void put(const uint8_t* data, size_t size) const {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) ||
        std::fclose(f) != 0) {
      std::abort();
    }
  }
};

void read_run(const mtp::record::RecordReader& rec, mtp::replay::ReplaySteps steps,
              bool optimizer_matters) {
  mtp::replay::RecordRun run;
  try {
    run = mtp::replay::read_record_run(rec, steps, optimizer_matters);
  } catch (const mtp::InputError& e) {  // RecordError, or another input error naming the record
    if (std::string(e.what()).find(rec.path()) == std::string::npos) std::abort();
    return;
  }
  {
    const auto& v = run.variant;
    if (v.pipeline_size < 1 || v.pipeline_size > 64 || v.data_parallel_size < 1 ||
        v.data_parallel_size > 64 || v.virtual_size < 1 || run.training.num_microbatches < 1 ||
        run.training.num_microbatches * v.data_parallel_size != run.global_microbatches ||
        run.model.num_layers < 1 || run.model.hidden_size < 1 || !(run.training.clip_grad >= 0)) {
      std::abort();
    }
  }
  try {
    run.model.validate();  // read_record_run validated it
  } catch (...) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const InputFile input;
  static const char kHdf5Signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  if (size >= 8 && std::memcmp(data, kHdf5Signature, 8) == 0) {
    input.put(data, size);
  } else if (!mtp::replay::fuzz::write_recipe_record(
                 std::string(reinterpret_cast<const char*>(data), size), input.path)) {
    return 0;
  }
  try {
    const mtp::record::RecordReader rec(input.path);
    read_run(rec, {1, 1}, false);
    read_run(rec, {1, 1}, true);
    read_run(rec, {2, 3}, true);
  } catch (const mtp::record::RecordError&) {
  }
  return 0;
}
