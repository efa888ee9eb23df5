// File: harness/data/prepare.h
//
// `mtp-harness data prepare`: text files → a byte-level Megatron indexed dataset. Token ids are
// the bytes (1..255); every document ends with the EOD token 0, the EOD of Megatron's
// ByteLevelTokenizer (megatron/core/tokenizers/text/libraries/bytelevel_tokenizer.py, eod =
// eos_id = 0), as tools/preprocess_data.py --append-eod writes it. One sequence per document;
// token dtype uint16, Megatron's DType.optimal_dtype for a vocabulary under 65500.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mtp::data {

/// The end-of-document token of byte-level datasets.
inline constexpr int32_t kByteLevelEod = 0;

/// How a text file is cut into documents.
enum class DocumentSplit {
  kFile,  ///< "file": the whole file is one document
  /// "blank-lines": every maximal run of non-blank lines is one document, each line with its
  /// '\n'; a blank line holds only ' ', '\t' and '\r' (or nothing) and belongs to no document.
  kBlankLines,
};

/// "file" | "blank-lines" → DocumentSplit; InputError naming the accepted values otherwise.
DocumentSplit parse_document_split(const std::string& name);

/// What data prepare wrote.
struct PrepareSummary {
  int64_t documents = 0;
  int64_t tokens = 0;  ///< EODs included
};

/// Reads every file of `text_paths` in order, cuts it into documents (per DocumentSplit; each
/// document's byte ids followed by the EOD; empty documents dropped) and writes
/// OUT_PREFIX.bin and OUT_PREFIX.idx (write_indexed_dataset, uint16). Throws InputError, before
/// reading any text, when OUT_PREFIX names no file or its .idx/.bin cannot be written there
/// (check_output_file) or is one of the texts; InputError naming the file when one cannot be
/// read or holds a 0 byte (naming the byte offset), or when no file yields a document;
/// InfraError when a write fails. Streamed: memory does not grow with the text (8 bytes per
/// document); nothing is left under either name on any failure.
PrepareSummary prepare_byte_dataset(const std::vector<std::string>& text_paths,
                                    const std::string& out_prefix, DocumentSplit split);

}  // namespace mtp::data
