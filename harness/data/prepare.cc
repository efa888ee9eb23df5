#include "harness/data/prepare.h"

#include <fmt/format.h>

#include "harness/common/error.h"
#include "harness/common/output_file.h"
#include "harness/data/file_bytes.h"
#include "harness/data/indexed_dataset.h"

namespace mtp::data {
namespace {

bool is_blank(const std::vector<uint8_t>& text, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') return false;
  }
  return true;
}

}  // namespace

DocumentSplit parse_document_split(const std::string& name) {
  if (name == "file") return DocumentSplit::kFile;
  if (name == "blank-lines") return DocumentSplit::kBlankLines;
  throw InputError(fmt::format("data prepare: --split \"{}\" (accepted: \"file\", "
                               "\"blank-lines\")", name));
}

std::vector<std::vector<int32_t>> byte_documents(const std::string& path,
                                                 const std::vector<uint8_t>& text,
                                                 DocumentSplit split) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == kByteLevelEod) {
      throw InputError(fmt::format("data prepare: '{}' has a 0 byte at offset {}; byte-level "
                                   "datasets use 0 as the end-of-document token", path, i));
    }
  }
  std::vector<std::vector<int32_t>> docs;
  std::vector<int32_t> doc;
  auto close = [&]() {
    if (doc.empty()) return;
    doc.push_back(kByteLevelEod);
    docs.push_back(std::move(doc));
    doc.clear();
  };
  size_t line = 0;
  while (line < text.size()) {
    size_t end = line;
    while (end < text.size() && text[end] != '\n') ++end;
    const size_t next = end < text.size() ? end + 1 : end;  // the line with its '\n'
    if (split == DocumentSplit::kBlankLines && is_blank(text, line, end)) {
      close();
    } else {
      doc.insert(doc.end(), text.begin() + line, text.begin() + next);
    }
    line = next;
  }
  close();
  return docs;
}

PrepareSummary prepare_byte_dataset(const std::vector<std::string>& text_paths,
                                    const std::string& out_prefix, DocumentSplit split) {
  // The outputs first, before any text is read: a bad prefix is bad input (InputError).
  if (out_prefix.empty() || out_prefix.back() == '/') {
    throw InputError(fmt::format("OUT_PREFIX '{}': names no dataset file (give a name, e.g. "
                                 "{}corpus)", out_prefix, out_prefix));
  }
  for (const char* ext : {".idx", ".bin"}) {
    check_output_file("OUT_PREFIX", out_prefix + ext);
    for (const auto& path : text_paths) {
      check_not_same_file("OUT_PREFIX", out_prefix + ext, "TEXT", path);
    }
  }
  std::vector<std::vector<int32_t>> docs;
  PrepareSummary summary;
  for (const auto& path : text_paths) {
    for (auto& d : byte_documents(path, read_file_bytes(path, "text file"), split)) {
      summary.tokens += static_cast<int64_t>(d.size());
      docs.push_back(std::move(d));
    }
  }
  if (docs.empty()) {
    throw InputError(fmt::format("data prepare: no document in {} (every file is empty{})",
                                 fmt::join(text_paths, ", "),
                                 split == DocumentSplit::kBlankLines ? " or blank" : ""));
  }
  summary.documents = static_cast<int64_t>(docs.size());
  write_indexed_dataset(out_prefix, docs, IndexDType::kUint16);
  return summary;
}

}  // namespace mtp::data
