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
  kUint8 = 1, kInt8 = 2, kInt16 = 3, kInt32 = 4, kInt64 = 5, kFloat64 = 6, kFloat32 = 7,
  kUint16 = 8,
};

/// The code's NumPy name ("uint16"), or "" for a code that is not in Megatron's enum.
std::string index_dtype_name(int code);

/// A Megatron indexed dataset held in memory, validated.
struct IndexedDataset {
  std::string prefix;                       ///< path prefix as given
  IndexDType dtype = IndexDType::kUint16;   ///< token type of .bin
  std::vector<int32_t> sequence_lengths;    ///< [n] tokens per sequence
  std::vector<int64_t> sequence_pointers;   ///< [n] byte offsets into .bin
  std::vector<int64_t> document_indices;    ///< [d] sequence index where each document starts
  /// Every sequence's tokens, sequence 0 first (Megatron's order with documents in order), as
  /// int32 ids ≥ 0.
  std::vector<int32_t> tokens;
  std::string sha256;                       ///< SHA-256 of the .idx bytes, then the .bin bytes
};

/// Reads and validates PREFIX.idx and PREFIX.bin. Throws InputError naming the file, the field
/// and its byte offset, and the rule broken: a missing or unreadable file; an index shorter than
/// its 34-byte header or than its counts need (truncated), or longer (trailing bytes); wrong
/// magic; version ≠ 1; a dtype code outside Megatron's enum, or a float code; a negative
/// sequence length; a sequence whose bytes [pointer, pointer + length·itemsize) pass the end of
/// the .bin or start before it; document_indices not starting at 0, decreasing, or not ending at
/// n; a token id < 0 or > 2^31 − 1; no tokens at all.
IndexedDataset read_indexed_dataset(const std::string& prefix);

/// Writes PREFIX.bin and PREFIX.idx (each atomically) with one sequence and one document per
/// entry of `documents`, as Megatron's IndexedDatasetBuilder.add_document + finalize do: pointers
/// are cumulative byte offsets, document_indices = 0, 1, …, n. `dtype` must be an integer code
/// whose range holds every id. Throws InputError naming the file (cannot be written) or the
/// document and position of an id the dtype cannot hold.
void write_indexed_dataset(const std::string& prefix,
                           const std::vector<std::vector<int32_t>>& documents, IndexDType dtype);

}  // namespace mtp::data
