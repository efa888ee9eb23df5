// libFuzzer target for the Megatron indexed-dataset reader (ci/sanitize.sh runs it from the seed
// corpus in fuzz_corpus/indexed_dataset_fuzzer/). Input: a 4-byte little-endian length L, then
// L bytes of PREFIX.idx (fewer when the input is shorter), then PREFIX.bin (the rest). The pair
// is opened as a training run opens it (MegatronSource: open_indexed_dataset), a few stream
// ranges are read directly and through a MicrobatchBuilder, and read_indexed_dataset's decoded
// stream must equal the source's. Every input must either read so or throw InputError; any
// other exception, a disagreement (abort), a crash or a sanitizer report is a finding.
//
// The seeds are datasets of every integer dtype as write_indexed_dataset writes them, and
// broken ones: truncated, a bad magic or dtype, a sequence past the end of the .bin, overlapping
// and misaligned sequences (a small token bomb), a negative token, empty sequences.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness/common/error.h"
#include "harness/data/indexed_dataset.h"
#include "harness/data/microbatch.h"
#include "harness/data/token_source.h"

namespace {

/// PREFIX.idx and PREFIX.bin of the current input: one pair per process, in /dev/shm when there
/// is one.
struct InputFiles {
  std::string prefix;
  InputFiles() {
    const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string dir_template = std::string(dir) + "/indexed_dataset_fuzzer_XXXXXX";
    if (::mkdtemp(dir_template.data()) == nullptr) std::abort();
    prefix = dir_template + "/data";
  }
  ~InputFiles() {
    ::unlink((prefix + ".idx").c_str());
    ::unlink((prefix + ".bin").c_str());
    ::rmdir(prefix.substr(0, prefix.size() - 5).c_str());
  }
  static void put(const std::string& path, const uint8_t* data, size_t size) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) ||
        std::fclose(f) != 0) {
      std::abort();
    }
  }
};

/// Reads [offset, offset + count) of `src` (clamped to its size).
std::vector<int32_t> read_range(const mtp::data::TokenSource& src, int64_t offset, int64_t count) {
  offset = std::clamp<int64_t>(offset, 0, src.size());
  count = std::min(count, src.size() - offset);
  std::vector<int32_t> out(static_cast<size_t>(count));
  src.read(offset, count, out.data());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const InputFiles files;
  if (size < 4) return 0;
  uint32_t idx_len;
  std::memcpy(&idx_len, data, 4);
  const size_t n = std::min<size_t>(idx_len, size - 4);
  InputFiles::put(files.prefix + ".idx", data + 4, n);
  InputFiles::put(files.prefix + ".bin", data + 4 + n, size - 4 - n);
  try {
    const mtp::data::MegatronSource src(files.prefix);
    if (src.size() < 1 || src.min_vocab_size() < 1) std::abort();
    const int64_t total = src.size();
    const std::vector<int32_t> head = read_range(src, 0, 64);
    read_range(src, total / 2 - 3, 7);
    const std::vector<int32_t> tail = read_range(src, total - 5, 5);
    for (int32_t id : head) {
      if (id < 0 || id >= src.min_vocab_size()) std::abort();
    }
    if (total >= 2) {
      mtp::data::DataConfig cfg;
      cfg.kind = "megatron";
      const int64_t s = std::min<int64_t>(total - 1, 8);
      const mtp::data::MicrobatchBuilder builder(src, cfg, 2, s, src.min_vocab_size());
      for (int64_t step = 1; step <= 2; ++step) {
        if (builder.build(step, 1, 2).tokens.size() != static_cast<size_t>(2 * s)) std::abort();
      }
    }
    // The decoded stream (when it is small enough to decode) is the source's, token for token.
    try {
      const mtp::data::IndexedDataset ds = mtp::data::read_indexed_dataset(files.prefix);
      if (static_cast<int64_t>(ds.tokens.size()) != total) std::abort();
      if (!std::equal(head.begin(), head.end(), ds.tokens.begin())) std::abort();
      if (!std::equal(tail.begin(), tail.end(), ds.tokens.end() - static_cast<long>(tail.size()))) {
        std::abort();
      }
    } catch (const mtp::InputError&) {
      // Refused only for a stream of more than 4 bytes per .bin byte (overlapping sequences).
      const auto code = src.dataset().dtype;
      const int64_t item =
          code == mtp::data::IndexDType::kUint8 || code == mtp::data::IndexDType::kInt8     ? 1
          : code == mtp::data::IndexDType::kInt16 || code == mtp::data::IndexDType::kUint16 ? 2
          : code == mtp::data::IndexDType::kInt32                                           ? 4
                                                                                            : 8;
      if (total * item <= 4 * static_cast<int64_t>(size - 4 - n)) std::abort();
    }
  } catch (const mtp::InputError& e) {
    if (std::string(e.what()).empty()) std::abort();
  }
  return 0;
}
