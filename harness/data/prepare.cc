#include "harness/data/prepare.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "harness/common/error.h"
#include "harness/common/input_file.h"
#include "harness/common/output_file.h"
#include "harness/common/temp_file.h"
#include "harness/data/file_bytes.h"
#include "harness/data/indexed_dataset.h"

namespace mtp::data {

DocumentSplit parse_document_split(const std::string& name) {
  if (name == "file") return DocumentSplit::kFile;
  if (name == "blank-lines") return DocumentSplit::kBlankLines;
  throw InputError(
      fmt::format("data prepare: --split \"{}\" (accepted: \"file\", "
                  "\"blank-lines\")",
                  name));
}

namespace {

/// PREFIX.bin in the making: uint16 tokens appended through a buffer to a TempFile, committed
/// (fsync, rename) only when complete.
class BinWriter {
 public:
  explicit BinWriter(const std::string& path) : tmp_(path), fd_(tmp_.open_exclusive()) {
    buf_.reserve(kBufferBytes);
  }
  ~BinWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  /// Appends `n` bytes of text as n uint16 tokens (little-endian).
  void tokens(const uint8_t* text, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      buf_.push_back(text[i]);
      buf_.push_back(0);
      if (buf_.size() >= kBufferBytes) flush();
    }
  }
  void eod() {
    const uint8_t zero = kByteLevelEod;
    buf_.push_back(zero);
    buf_.push_back(0);
  }
  void commit() {
    flush();
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close failed");
    tmp_.commit();
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;
  [[noreturn]] void fail(const char* what) {
    const int err = errno;
    throw InfraError(fmt::format("{}: {}: {}", tmp_.final_path(), what, std::strerror(err)));
  }
  void flush() {
    size_t done = 0;
    while (done < buf_.size()) {
      const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("write failed");
      done += static_cast<size_t>(n);
    }
    buf_.clear();
  }
  TempFile tmp_;
  int fd_;
  std::vector<uint8_t> buf_;
};

/// Streams one text file into `bin`, cutting it into documents as byte_documents does, and
/// appends each document's length (EOD included) to `lengths`. Memory: one read buffer, whatever
/// the file's size. The blank prefix of a line (' ', '\t', '\r') is held back as a byte range
/// until the line shows whether it is blank, and re-read from the file when it is not.
void stream_documents(const std::string& path, DocumentSplit split, BinWriter& bin,
                      std::vector<int64_t>& lengths) {
  InputFile in(path, "data: text file", kMaxDataFileBytes);
  std::vector<uint8_t> buf(size_t{1} << 20);
  uint64_t offset = 0;        // of buf[0] in the file
  int64_t doc = 0;            // tokens of the open document so far
  bool line_blank = true;     // the current line holds only ' ', '\t', '\r' so far
  uint64_t pending_from = 0;  // kBlankLines: the current line's held-back blank prefix
  auto close_doc = [&]() {
    if (doc == 0) return;
    bin.eod();
    lengths.push_back(doc + 1);
    doc = 0;
  };
  std::vector<uint8_t> again;
  auto release_pending = [&](uint64_t end) {  // the held-back prefix [pending_from, end)
    for (uint64_t at = pending_from; at < end;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(end - at, buf.size()));
      again.resize(n);
      in.read_at(at, again.data(), n);
      bin.tokens(again.data(), n);
      doc += static_cast<int64_t>(n);
      at += n;
    }
  };
  while (const size_t n = in.read(buf.data(), buf.size())) {
    size_t plain = 0;  // start of the bytes of buf not yet written
    for (size_t i = 0; i < n; ++i) {
      const uint8_t c = buf[i];
      if (c == kByteLevelEod) {
        throw InputError(
            fmt::format("data prepare: '{}' has a 0 byte at offset {}; byte-level "
                        "datasets use 0 as the end-of-document token",
                        path, offset + i));
      }
      if (split == DocumentSplit::kFile) continue;
      if (line_blank) {
        if (c == ' ' || c == '\t' || c == '\r') continue;  // still held back
        if (c == '\n') {  // a blank line: ends the document, belongs to none
          close_doc();
          pending_from = offset + i + 1;
          plain = i + 1;
          continue;
        }
        // The line is not blank: its held-back prefix is text after all.
        if (pending_from < offset) {
          release_pending(offset);
          pending_from = offset;
        }
        plain = static_cast<size_t>(pending_from - offset);
        line_blank = false;
      }
      if (c == '\n') {  // the line ends with its '\n'
        bin.tokens(buf.data() + plain, i + 1 - plain);
        doc += static_cast<int64_t>(i + 1 - plain);
        plain = i + 1;
        line_blank = true;
        pending_from = offset + i + 1;
      }
    }
    if (split == DocumentSplit::kFile || !line_blank) {
      bin.tokens(buf.data() + plain, n - plain);
      doc += static_cast<int64_t>(n - plain);
    }
    offset += n;
  }
  // A blank last line without '\n' is dropped: the bytes held back stay unwritten.
  close_doc();
}

}  // namespace

PrepareSummary prepare_byte_dataset(const std::vector<std::string>& text_paths,
                                    const std::string& out_prefix, DocumentSplit split) {
  // The outputs first, before any text is read: a bad prefix is bad input (InputError).
  if (out_prefix.empty() || out_prefix.back() == '/') {
    throw InputError(
        fmt::format("OUT_PREFIX '{}': names no dataset file (give a name, e.g. "
                    "{}corpus)",
                    out_prefix, out_prefix));
  }
  FileRoles files;
  for (const auto& path : text_paths) files.input("TEXT", path);
  for (const char* ext : {".idx", ".bin"}) files.output("OUT_PREFIX", out_prefix + ext);
  // Streamed: the text is read once, in pieces, and written as it is read; what stays in memory
  // is 8 bytes per document (a 1 GiB text needed 13-16 GiB before).
  BinWriter bin(out_prefix + ".bin");
  std::vector<int64_t> lengths;
  for (const auto& path : text_paths) stream_documents(path, split, bin, lengths);
  if (lengths.empty()) {
    throw InputError(fmt::format("data prepare: no document in {} (every file is empty{})",
                                 fmt::join(text_paths, ", "),
                                 split == DocumentSplit::kBlankLines ? " or blank" : ""));
  }
  PrepareSummary summary;
  summary.documents = static_cast<int64_t>(lengths.size());
  for (int64_t n : lengths) summary.tokens += n;
  // Data first, index last: a reader that finds the index finds its data (Megatron's order).
  const std::vector<uint8_t> idx = index_file_bytes(lengths, IndexDType::kUint16);
  bin.commit();
  try {
    write_file_atomic(out_prefix + ".idx", idx);
  } catch (...) {
    std::remove((out_prefix + ".bin").c_str());
    throw;
  }
  return summary;
}

}  // namespace mtp::data
