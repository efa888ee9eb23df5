// File: harness/data/indexed_dataset.h
//
// Megatron-LM indexed datasets: PREFIX.idx (the "MMIDIDX" index) and PREFIX.bin (the tokens), as
// megatron/core/datasets/indexed_dataset.py (_IndexWriter, _IndexReader, IndexedDataset; commit
// d98e8a64dd) writes and reads them. All integers little-endian:
//
//   .idx  byte 0    magic     9 bytes "MMIDIDX\0\0"
//         byte 9    version   u64, 1
//         byte 17   dtype     u8, the code of the .bin token type (DType enum): 1 uint8, 2 int8,
//                             3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16
//         byte 18   sequence_count   u64, n
//         byte 26   document_count   u64, d (entries of document_indices: documents + 1)
//         byte 34   sequence_lengths i32[n], tokens per sequence
//                   sequence_pointers i64[n], byte offset of each sequence in .bin
//                   document_indices  i64[d], the sequence index at which each document starts;
//                                     0 first, n last
//         (multimodal datasets append i8[n] sequence modes; not supported here)
//   .bin  each sequence's tokens at its pointer, in the dtype of the code.
//
// Megatron's GPT dataset treats each sequence as a "document" of its sample index
// (gpt_dataset.py, helpers.cpp build_sample_idx); data prepare writes one sequence per document.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mtp::data {

/// Megatron's DType codes (indexed_dataset.py DType).
enum class IndexDType : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

/// The code's NumPy name ("uint16"), or "" for a code that is not in Megatron's enum.
std::string index_dtype_name(int code);

/// A Megatron indexed dataset held in memory, validated. Its token stream (every sequence's
/// tokens, sequence 0 first: Megatron's order with documents in order) is what the index
/// declares, which may be far more than the .bin holds: sequences may overlap (4,000 sequences
/// of a 48 KB index all at byte 0 of a 2 MiB .bin declare 4 Gi tokens). read_tokens decodes any
/// part of it from the .bin bytes on demand, so what a reader allocates is bounded by the files
/// and by what it reads, never by what the index declares.
struct IndexedDataset {
  std::string prefix;                      ///< path prefix as given
  IndexDType dtype = IndexDType::kUint16;  ///< token type of .bin
  std::vector<int32_t> sequence_lengths;   ///< [n] tokens per sequence
  std::vector<int64_t> sequence_pointers;  ///< [n] byte offsets into .bin
  std::vector<int64_t> document_indices;   ///< [d] sequence index where each document starts
  /// [n + 1] the stream position of each sequence's first token; back() = num_tokens().
  std::vector<int64_t> sequence_starts;
  std::vector<uint8_t> bin;  ///< the .bin bytes
  int32_t max_token = 0;     ///< the largest id of the stream
  /// The whole stream as int32 ids ≥ 0: filled by read_indexed_dataset only (empty after
  /// open_indexed_dataset).
  std::vector<int32_t> tokens;
  std::string sha256;  ///< SHA-256 of the .idx bytes, then the .bin bytes

  /// Tokens in the stream (the sum of sequence_lengths).
  int64_t num_tokens() const { return sequence_starts.empty() ? 0 : sequence_starts.back(); }
  /// Decodes stream tokens [offset, offset + count) into `out` (every id was checked when the
  /// dataset was opened). Throws InternalError when the range is outside [0, num_tokens()).
  void read_tokens(int64_t offset, int64_t count, int32_t* out) const;
};

/// Reads and validates PREFIX.idx and PREFIX.bin, keeping the .bin bytes and decoding no token
/// stream (IndexedDataset::read_tokens reads it). Every token of every sequence is checked, each
/// byte of the .bin read once per token alignment, however often sequences overlap. Throws
/// InputError naming the file, the field and its byte offset, and the rule broken: a missing or
/// unreadable file; an index shorter than its 34-byte header or than its counts need
/// (truncated), or longer (trailing bytes); wrong magic; version ≠ 1; a dtype code outside
/// Megatron's enum, or a float code; a negative sequence length; a sequence whose bytes
/// [pointer, pointer + length·itemsize) pass the end of the .bin or start before it (the first
/// such sequence in index order); document_indices not starting at 0, decreasing, or not
/// ending at n; a token id < 0 or > 2^31 − 1 (the first in stream order: its sequence, its
/// position in it and its byte); no tokens at all.
IndexedDataset open_indexed_dataset(const std::string& prefix);

/// open_indexed_dataset, with the whole stream decoded into `tokens` (for tests and tools that
/// want it as a vector). Throws InputError as open_indexed_dataset does, and when the stream's
/// bytes are more than 4 times the .bin's (sequences overlap so much that decoding them all
/// would allocate more than the files hold), naming the .idx and the sequence at which the
/// declared total passes that bound.
IndexedDataset read_indexed_dataset(const std::string& prefix);

/// The bytes of PREFIX.idx for one sequence and one document per entry of `sequence_lengths`
/// (tokens each, ≤ 2^31 − 1), the tokens stored as `dtype` (an integer code): Megatron's
/// MMIDIDX header, then lengths (int32), pointers (cumulative byte offsets, int64) and
/// document_indices = 0, 1, …, n (int64), as IndexedDatasetBuilder.finalize writes them.
std::vector<uint8_t> index_file_bytes(const std::vector<int64_t>& sequence_lengths,
                                      IndexDType dtype);

/// Writes PREFIX.bin and PREFIX.idx (each atomically) with one sequence and one document per
/// entry of `documents`, as Megatron's IndexedDatasetBuilder.add_document + finalize do: pointers
/// are cumulative byte offsets, document_indices = 0, 1, …, n. `dtype` must be an integer code
/// whose range holds every id. Throws InputError naming the file (cannot be written) or the
/// document and position of an id the dtype cannot hold.
void write_indexed_dataset(const std::string& prefix,
                           const std::vector<std::vector<int32_t>>& documents, IndexDType dtype);

}  // namespace mtp::data
