// Megatron MMIDIDX reader and writer (indexed_dataset.h). The reader checks every field before
// using it, so a corrupted file is an InputError naming the field, never an out-of-range read.
#include "harness/data/indexed_dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "harness/common/error.h"
#include "harness/data/file_bytes.h"
#include "harness/data/token_source.h"

namespace mtp::data {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
constexpr size_t kHeaderBytes = 34;  // magic 9, version 8, dtype 1, sequence and document count

/// Facts of one integer token type.
struct TokenType {
  int size;
  bool is_signed;
};

/// The integer token type of `code`; size 0 for a float or unknown code.
TokenType token_type(IndexDType code) {
  switch (code) {
    case IndexDType::kUint8:
      return {1, false};
    case IndexDType::kInt8:
      return {1, true};
    case IndexDType::kInt16:
      return {2, true};
    case IndexDType::kInt32:
      return {4, true};
    case IndexDType::kInt64:
      return {8, true};
    case IndexDType::kUint16:
      return {2, false};
    default:
      return {0, false};
  }
}

/// Little-endian unsigned integer of `size` bytes at `p`.
uint64_t load_le(const uint8_t* p, int size) {
  uint64_t v = 0;
  for (int i = size - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(uint64_t v, int size, std::vector<uint8_t>& out) {
  for (int i = 0; i < size; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

/// The token at `p` as a signed 64-bit value.
int64_t load_token(const uint8_t* p, TokenType t) {
  const uint64_t raw = load_le(p, t.size);
  if (!t.is_signed || t.size == 8) return static_cast<int64_t>(raw);
  const uint64_t sign = uint64_t{1} << (8 * t.size - 1);
  return static_cast<int64_t>(raw ^ sign) - static_cast<int64_t>(sign);
}

std::string hex_bytes(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

/// Parses the .idx bytes into `ds` (everything but the tokens).
void parse_index(const std::string& path, const std::vector<uint8_t>& idx, IndexedDataset& ds) {
  auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("data: Megatron index '{}': {}", path, what));
  };
  if (idx.size() < kHeaderBytes) {
    fail(
        fmt::format("truncated: {} bytes, but the header alone needs {} (magic 9, version 8, "
                    "dtype code 1, sequence count 8, document count 8)",
                    idx.size(), kHeaderBytes));
  }
  if (std::memcmp(idx.data(), kMagic, sizeof kMagic) != 0) {
    fail(
        fmt::format("magic at byte 0 is {}, expected 4d4d49444944580000 (\"MMIDIDX\\0\\0\", "
                    "Megatron's MMIDIDX index)",
                    hex_bytes(idx.data(), sizeof kMagic)));
  }
  const uint64_t version = load_le(idx.data() + 9, 8);
  if (version != kVersion) {
    fail(fmt::format("version at byte 9 is {}, expected {}", version, kVersion));
  }
  const int code = idx[17];
  if (index_dtype_name(code).empty()) {
    fail(
        fmt::format("dtype code at byte 17 is {}, not one of Megatron's DType codes (1 uint8, "
                    "2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)",
                    code));
  }
  ds.dtype = static_cast<IndexDType>(code);
  if (token_type(ds.dtype).size == 0) {
    fail(fmt::format("dtype code at byte 17 is {} ({}), but token ids must have an integer type",
                     code, index_dtype_name(code)));
  }
  const uint64_t n = load_le(idx.data() + 18, 8);
  const uint64_t d = load_le(idx.data() + 26, 8);
  // 12 bytes per sequence and 8 per document entry; bound the counts by the file size first so
  // that the products cannot overflow.
  const uint64_t body = idx.size() - kHeaderBytes;
  if (n > body / 12 || d > body / 8 || n * 12 + d * 8 > body) {
    fail(
        fmt::format("truncated: sequence_count {} (byte 18) and document_count {} (byte 26) "
                    "need {} + 12·{} + 8·{} bytes, the file has {}",
                    n, d, kHeaderBytes, n, d, idx.size()));
  }
  const uint64_t need = kHeaderBytes + n * 12 + d * 8;
  if (idx.size() != need) {
    fail(
        fmt::format("{} bytes after the document indices (the counts need {} bytes, the file "
                    "has {}){}",
                    idx.size() - need, need, idx.size(),
                    idx.size() - need == n ? "; a multimodal index with sequence modes is not "
                                             "supported"
                                           : ""));
  }
  if (d == 0) fail("document_count at byte 26 is 0; document_indices needs at least the entry 0");
  const size_t lengths_at = kHeaderBytes, pointers_at = lengths_at + 4 * n,
               documents_at = pointers_at + 8 * n;
  ds.sequence_lengths.resize(n);
  ds.sequence_pointers.resize(n);
  ds.document_indices.resize(d);
  for (uint64_t i = 0; i < n; ++i) {
    const size_t at = lengths_at + 4 * i;
    const auto len = static_cast<int32_t>(static_cast<uint32_t>(load_le(idx.data() + at, 4)));
    if (len < 0) fail(fmt::format("sequence_lengths[{}] at byte {} is {} (< 0)", i, at, len));
    ds.sequence_lengths[i] = len;
    ds.sequence_pointers[i] = static_cast<int64_t>(load_le(idx.data() + pointers_at + 8 * i, 8));
  }
  for (uint64_t i = 0; i < d; ++i) {
    const size_t at = documents_at + 8 * i;
    const auto v = static_cast<int64_t>(load_le(idx.data() + at, 8));
    if (i == 0 && v != 0) {
      fail(fmt::format("document_indices[0] at byte {} is {}, expected 0", at, v));
    }
    if (i > 0 && v < ds.document_indices[i - 1]) {
      fail(
          fmt::format("document_indices[{}] at byte {} is {}, less than the entry before ({}); "
                      "document starts must not decrease",
                      i, at, v, ds.document_indices[i - 1]));
    }
    ds.document_indices[i] = v;
  }
  if (ds.document_indices.back() != static_cast<int64_t>(n)) {
    fail(
        fmt::format("document_indices[{}] at byte {} is {}, expected sequence_count {} (the last "
                    "entry closes the last document)",
                    d - 1, documents_at + 8 * (d - 1), ds.document_indices.back(), n));
  }
}

/// A token id the harness accepts: in [0, 2^31 − 1] (int32 ids).
bool valid_id(int64_t id) { return id >= 0 && id <= std::numeric_limits<int32_t>::max(); }

/// Checks that every sequence lies inside the .bin and fills ds.sequence_starts (the first
/// sequence in index order that does not is the error).
void check_bounds(const std::string& idx_path, const std::string& bin_path, IndexedDataset& ds) {
  const TokenType t = token_type(ds.dtype);
  const size_t n = ds.sequence_lengths.size();
  const size_t pointers_at = kHeaderBytes + 4 * n;
  ds.sequence_starts.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t ptr = ds.sequence_pointers[i];
    const int64_t len = ds.sequence_lengths[i];
    const uint64_t end = static_cast<uint64_t>(ptr) + static_cast<uint64_t>(len) * t.size;
    if (ptr < 0 || end > ds.bin.size()) {
      throw InputError(fmt::format(
          "data: Megatron index '{}': sequence {} (sequence_pointers[{}] at byte {} = {}, "
          "sequence_lengths[{}] = {} tokens of {} bytes) spans bytes [{}, {}) of '{}', which has "
          "{} bytes: a sequence must lie inside the data file",
          idx_path, i, i, pointers_at + 8 * i, ptr, i, len, t.size, ptr, ptr + len * t.size,
          bin_path, ds.bin.size()));
    }
    // n < 2^28 sequences of < 2^31 tokens: no overflow.
    ds.sequence_starts[i + 1] = ds.sequence_starts[i] + len;
  }
}

/// Every sequence as a range [first, last) of token slots of one alignment class: slot k of
/// class r is the token at byte r + k·size of the .bin.
struct Span {
  int64_t first, last;
};

/// The ranges of token slots the sequences cover, per alignment class (pointer mod size),
/// sorted and merged: each slot of the .bin that some sequence reads appears once.
std::vector<std::vector<Span>> covered_slots(const IndexedDataset& ds, int size) {
  std::vector<std::vector<Span>> spans(static_cast<size_t>(size));
  for (size_t i = 0; i < ds.sequence_lengths.size(); ++i) {
    if (ds.sequence_lengths[i] == 0) continue;
    const int64_t ptr = ds.sequence_pointers[i];
    const int64_t first = ptr / size;
    spans[static_cast<size_t>(ptr % size)].push_back({first, first + ds.sequence_lengths[i]});
  }
  for (auto& list : spans) {
    std::sort(list.begin(), list.end(),
              [](const Span& a, const Span& b) { return a.first < b.first; });
    std::vector<Span> merged;
    for (const Span& s : list) {
      if (!merged.empty() && s.first <= merged.back().last) {
        merged.back().last = std::max(merged.back().last, s.last);
      } else {
        merged.push_back(s);
      }
    }
    list = std::move(merged);
  }
  return spans;
}

/// Throws the InputError of the first invalid token in stream order (its sequence, its position
/// and its byte), given that some covered slot holds one. Per alignment class, a bitset of the
/// invalid slots and a running count per 64 slots answer "does sequence i hold one" at once.
[[noreturn]] void throw_first_invalid(const std::string& bin_path, const IndexedDataset& ds,
                                      const std::vector<std::vector<Span>>& spans) {
  const TokenType t = token_type(ds.dtype);
  const size_t classes = spans.size();
  const int64_t slots = static_cast<int64_t>(ds.bin.size()) / t.size + 1;
  const size_t words = static_cast<size_t>(slots / 64 + 1);
  std::vector<std::vector<uint64_t>> bad(classes);
  std::vector<std::vector<uint32_t>> before(classes);  // invalid slots in words [0, w)
  for (size_t r = 0; r < classes; ++r) {
    if (spans[r].empty()) continue;
    bad[r].assign(words, 0);
    for (const Span& s : spans[r]) {
      for (int64_t k = s.first; k < s.last; ++k) {
        const size_t at = r + static_cast<size_t>(k) * t.size;
        if (!valid_id(load_token(ds.bin.data() + at, t))) {
          bad[r][static_cast<size_t>(k / 64)] |= uint64_t{1} << (k % 64);
        }
      }
    }
    before[r].assign(words + 1, 0);
    for (size_t w = 0; w < words; ++w) {
      before[r][w + 1] = before[r][w] + static_cast<uint32_t>(__builtin_popcountll(bad[r][w]));
    }
  }
  // Invalid slots in [0, k) of class r.
  auto count_below = [&](size_t r, int64_t k) -> uint64_t {
    const size_t w = static_cast<size_t>(k / 64);
    const uint64_t partial = k % 64 == 0 ? 0 : bad[r][w] & ((uint64_t{1} << (k % 64)) - 1);
    return before[r][w] + static_cast<uint64_t>(__builtin_popcountll(partial));
  };
  for (size_t i = 0; i < ds.sequence_lengths.size(); ++i) {
    const int64_t len = ds.sequence_lengths[i];
    if (len == 0) continue;
    const int64_t ptr = ds.sequence_pointers[i];
    const size_t r = static_cast<size_t>(ptr % t.size);
    const int64_t first = ptr / t.size;
    if (count_below(r, first + len) == count_below(r, first)) continue;
    for (int64_t k = 0; k < len; ++k) {
      const size_t at = static_cast<size_t>(ptr) + static_cast<size_t>(k) * t.size;
      const int64_t id = load_token(ds.bin.data() + at, t);
      if (!valid_id(id)) {
        throw InputError(
            fmt::format("data: Megatron data file '{}': token {} of sequence {} at "
                        "byte {} is {}; token ids must be in [0, 2^31 − 1]",
                        bin_path, k, i, at, id));
      }
    }
  }
  MTP_INTERNAL_ASSERT(false, "an invalid token was found but no sequence holds it");
}

/// Checks every token the sequences declare and sets ds.max_token, reading each covered slot
/// of the .bin once (so overlapping sequences cost no more than the .bin's size).
void check_tokens(const std::string& bin_path, IndexedDataset& ds) {
  if (ds.num_tokens() == 0) {
    throw InputError(fmt::format("data: Megatron dataset '{}' holds no tokens", ds.prefix));
  }
  const TokenType t = token_type(ds.dtype);
  const std::vector<std::vector<Span>> spans = covered_slots(ds, t.size);
  int64_t max_id = 0;
  bool invalid = false;
  for (size_t r = 0; r < spans.size(); ++r) {
    for (const Span& s : spans[r]) {
      for (int64_t k = s.first; k < s.last; ++k) {
        const int64_t id = load_token(ds.bin.data() + r + static_cast<size_t>(k) * t.size, t);
        invalid = invalid || !valid_id(id);
        max_id = std::max(max_id, id);
      }
    }
  }
  if (invalid) throw_first_invalid(bin_path, ds, spans);
  ds.max_token = static_cast<int32_t>(max_id);
}

}  // namespace

std::string index_dtype_name(int code) {
  switch (code) {
    case 1:
      return "uint8";
    case 2:
      return "int8";
    case 3:
      return "int16";
    case 4:
      return "int32";
    case 5:
      return "int64";
    case 6:
      return "float64";
    case 7:
      return "float32";
    case 8:
      return "uint16";
    default:
      return "";
  }
}

void IndexedDataset::read_tokens(int64_t offset, int64_t count, int32_t* out) const {
  MTP_INTERNAL_ASSERT(
      offset >= 0 && count >= 0 && offset <= num_tokens() - count,
      fmt::format("read [{}, {}) outside {} tokens", offset, offset + count, num_tokens()));
  if (count == 0) return;
  const TokenType t = token_type(dtype);
  // The sequence holding stream position `offset`: the last start at or before it (empty
  // sequences share their start with the next one and are skipped).
  size_t i =
      static_cast<size_t>(std::upper_bound(sequence_starts.begin(), sequence_starts.end(), offset) -
                          sequence_starts.begin() - 1);
  for (int64_t done = 0; done < count; ++i) {
    const int64_t k = offset + done - sequence_starts[i];
    const int64_t take = std::min<int64_t>(count - done, sequence_lengths[i] - k);
    const uint8_t* p = bin.data() + sequence_pointers[i] + k * t.size;
    for (int64_t j = 0; j < take; ++j) {
      out[done + j] = static_cast<int32_t>(load_token(p + j * t.size, t));
    }
    done += take;
  }
}

IndexedDataset open_indexed_dataset(const std::string& prefix) {
  IndexedDataset ds;
  ds.prefix = prefix;
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  const std::vector<uint8_t> idx = read_file_bytes(idx_path, "Megatron index");
  ds.bin = read_file_bytes(bin_path, "Megatron data file");
  parse_index(idx_path, idx, ds);
  check_bounds(idx_path, bin_path, ds);
  check_tokens(bin_path, ds);
  ds.sha256 = sha256_hex({{idx.data(), idx.size()}, {ds.bin.data(), ds.bin.size()}});
  return ds;
}

IndexedDataset read_indexed_dataset(const std::string& prefix) {
  IndexedDataset ds = open_indexed_dataset(prefix);
  const int size = token_type(ds.dtype).size;
  constexpr uint64_t kMaxExpansion = 4;  // stream bytes per .bin byte decoded into a vector
  const uint64_t bound = kMaxExpansion * ds.bin.size();
  if (static_cast<uint64_t>(ds.num_tokens()) * size > bound) {
    const size_t i =
        static_cast<size_t>(std::upper_bound(ds.sequence_starts.begin(), ds.sequence_starts.end(),
                                             static_cast<int64_t>(bound / size)) -
                            ds.sequence_starts.begin() - 1);
    throw InputError(fmt::format(
        "data: Megatron index '{}.idx': sequences 0 to {} declare {} tokens ({} bytes of {}), more "
        "than {} times the {} bytes of '{}.bin': its sequences overlap; the stream is not decoded "
        "into memory (a training run reads it as it goes)",
        prefix, i, ds.sequence_starts[i + 1], ds.sequence_starts[i + 1] * size,
        index_dtype_name(static_cast<int>(ds.dtype)), kMaxExpansion, ds.bin.size(), prefix));
  }
  ds.tokens.resize(static_cast<size_t>(ds.num_tokens()));
  ds.read_tokens(0, ds.num_tokens(), ds.tokens.data());
  return ds;
}

std::vector<uint8_t> index_file_bytes(const std::vector<int64_t>& sequence_lengths,
                                      IndexDType dtype) {
  const TokenType t = token_type(dtype);
  MTP_INTERNAL_ASSERT(t.size > 0, "index_file_bytes needs an integer dtype");
  std::vector<uint8_t> lengths, pointers, doc_indices;
  store_le(0, 8, doc_indices);
  uint64_t offset = 0;
  for (size_t i = 0; i < sequence_lengths.size(); ++i) {
    const int64_t n = sequence_lengths[i];
    MTP_INTERNAL_ASSERT(n >= 0 && n <= std::numeric_limits<int32_t>::max(),
                        "document too long for an int32 sequence length");
    store_le(static_cast<uint64_t>(n), 4, lengths);
    store_le(offset, 8, pointers);
    offset += static_cast<uint64_t>(n) * t.size;
    store_le(i + 1, 8, doc_indices);
  }
  std::vector<uint8_t> idx(kMagic, kMagic + sizeof kMagic);
  store_le(kVersion, 8, idx);
  idx.push_back(static_cast<uint8_t>(dtype));
  store_le(sequence_lengths.size(), 8, idx);
  store_le(sequence_lengths.size() + 1, 8, idx);
  idx.insert(idx.end(), lengths.begin(), lengths.end());
  idx.insert(idx.end(), pointers.begin(), pointers.end());
  idx.insert(idx.end(), doc_indices.begin(), doc_indices.end());
  return idx;
}

void write_indexed_dataset(const std::string& prefix,
                           const std::vector<std::vector<int32_t>>& documents, IndexDType dtype) {
  const TokenType t = token_type(dtype);
  MTP_INTERNAL_ASSERT(t.size > 0, "write_indexed_dataset needs an integer dtype");
  const int64_t max_id = t.size == 8 ? std::numeric_limits<int64_t>::max()
                                     : (int64_t{1} << (8 * t.size - (t.is_signed ? 1 : 0))) - 1;
  std::vector<uint8_t> bin;
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < documents.size(); ++i) {
    const auto& doc = documents[i];
    for (size_t k = 0; k < doc.size(); ++k) {
      if (doc[k] < 0 || doc[k] > max_id) {
        throw InputError(
            fmt::format("data: token {} of document {} is {}, outside the range of "
                        "{} (0..{})",
                        k, i, doc[k], index_dtype_name(static_cast<int>(dtype)), max_id));
      }
      store_le(static_cast<uint64_t>(doc[k]), t.size, bin);
    }
    lengths.push_back(static_cast<int64_t>(doc.size()));
  }
  const std::vector<uint8_t> idx = index_file_bytes(lengths, dtype);
  // Data first, index last: a reader that finds the index finds its data (Megatron's order too).
  // When the index cannot be written, the new data file goes too: no .bin beside an old .idx.
  write_file_atomic(prefix + ".bin", bin);
  try {
    write_file_atomic(prefix + ".idx", idx);
  } catch (...) {
    std::remove((prefix + ".bin").c_str());
    throw;
  }
}

}  // namespace mtp::data
