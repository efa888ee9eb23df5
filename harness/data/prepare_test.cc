// data prepare: documents per file or per blank-line block, the EOD after each, and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "harness/common/error.h"
#include "harness/common/test_util.h"
#include "harness/data/indexed_dataset.h"
#include "harness/data/prepare.h"

namespace mtp::data {
namespace {

using ::testing::HasSubstr;

std::vector<int32_t> ids(const std::string& s, bool eod = true) {
  std::vector<int32_t> v(s.begin(), s.end());
  if (eod) v.push_back(kByteLevelEod);
  return v;
}

/// The documents data prepare makes of `text` (written to a file, prepared, read back).
std::vector<std::vector<int32_t>> documents_of(const std::string& text, DocumentSplit split,
                                               const std::string& name = "t.txt") {
  const mtp::testing_util::ScratchDir scratch;  // per test: ctest runs tests in parallel
  const std::string dir = scratch.path() + "/";
  { std::ofstream(dir + name, std::ios::binary) << text; }
  std::vector<std::vector<int32_t>> docs;
  try {
    prepare_byte_dataset({dir + name}, dir + "docs", split);
  } catch (const InputError& e) {
    if (std::string(e.what()).find("no document in") != std::string::npos) return docs;
    throw;
  }
  const IndexedDataset ds = read_indexed_dataset(dir + "docs");
  size_t at = 0;
  for (int32_t n : ds.sequence_lengths) {
    docs.emplace_back(ds.tokens.begin() + at, ds.tokens.begin() + at + n);
    at += n;
  }
  return docs;
}

/// An independent splitter, written for this test from prepare.h's rule: every maximal run of
/// non-blank lines is a document, each line with its '\n'.
std::vector<std::vector<int32_t>> split_blank_lines(const std::string& text) {
  std::vector<std::vector<int32_t>> docs;
  std::vector<int32_t> doc;
  size_t i = 0;
  while (i < text.size()) {
    const size_t nl = text.find('\n', i);
    const size_t end = nl == std::string::npos ? text.size() : nl + 1;
    const std::string line = text.substr(i, end - i);
    if (line.find_first_not_of(" \t\r\n") == std::string::npos) {
      if (!doc.empty()) docs.push_back(ids(std::string(doc.begin(), doc.end())));
      doc.clear();
    } else {
      doc.insert(doc.end(), line.begin(), line.end());
    }
    i = end;
  }
  if (!doc.empty()) docs.push_back(ids(std::string(doc.begin(), doc.end())));
  return docs;
}

TEST(PrepareTest, BlankLineBlocksAreDocuments) {
  // Blank lines (empty, or only spaces, tabs, CR) separate documents and belong to none.
  EXPECT_EQ(documents_of("\nab\ncd\n \t\r\n\nef\r\nx", DocumentSplit::kBlankLines),
            (std::vector<std::vector<int32_t>>{ids("ab\ncd\n"), ids("ef\r\nx")}));
  EXPECT_TRUE(documents_of("\n \n", DocumentSplit::kBlankLines).empty());
  EXPECT_EQ(documents_of("  a\n \t\n", DocumentSplit::kBlankLines),
            (std::vector<std::vector<int32_t>>{ids("  a\n")}));
}

TEST(PrepareTest, StreamedAcrossReadBuffersTheDocumentsAreTheSame) {
  // Lines and blank prefixes that straddle the 1 MiB read buffer, and a 3 MiB blank prefix of
  // a non-blank line: held back, then re-read.
  std::string text = std::string((1 << 20) - 3, 'a') + "\n  \t\r\n" + std::string(3 << 20, ' ') +
                     "b\n" + std::string(1 << 20, '\t') + "\n" + "c\r\n\n\n" +
                     std::string((1 << 20) + 7, 'd') + "\n   ";
  EXPECT_EQ(documents_of(text, DocumentSplit::kBlankLines), split_blank_lines(text));
  EXPECT_EQ(documents_of(text, DocumentSplit::kFile),
            (std::vector<std::vector<int32_t>>{ids(text)}));
}

TEST(PrepareTest, WholeFileIsOneDocument) {
  EXPECT_EQ(documents_of("ab\n\ncd", DocumentSplit::kFile),
            (std::vector<std::vector<int32_t>>{ids("ab\n\ncd")}));
  EXPECT_TRUE(documents_of("", DocumentSplit::kFile).empty());
}

TEST(PrepareTest, RejectsTheEodByteNamingFileAndOffsetLeavingNoFile) {
  const mtp::testing_util::ScratchDir scratch;  // per test: ctest runs tests in parallel
  const std::string dir = scratch.path() + "/";
  try {
    documents_of(std::string("ab\0c", 4), DocumentSplit::kFile, "notes.txt");
    FAIL() << "accepted a 0 byte";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("notes.txt' has a 0 byte at offset 2"));
  }
  EXPECT_THROW(parse_document_split("paragraph"), InputError);
}

TEST(PrepareTest, MemoryDoesNotGrowWithTheText) {
  // 96 MiB of text prepared under an address-space limit of 64 MiB more than the process has:
  // the whole text in memory (and 4 bytes a token as before) could not fit.
  const mtp::testing_util::ScratchDir scratch;  // per test: ctest runs tests in parallel
  const std::string dir = scratch.path() + "/";
  {
    std::ofstream out(dir + "big.txt", std::ios::binary);
    const std::string line = std::string(1023, 'x') + "\n";
    for (int i = 0; i < 96 * 1024; ++i) out << line;
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::ifstream status("/proc/self/status");
    std::string key;
    uint64_t vm_kib = 0;
    while (status >> key) {
      if (key == "VmSize:" && status >> vm_kib) break;
    }
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = (vm_kib << 10) + (uint64_t{64} << 20);
    ::setrlimit(RLIMIT_AS, &lim);
    try {
      prepare_byte_dataset({dir + "big.txt"}, dir + "big", DocumentSplit::kFile);
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(read_indexed_dataset(dir + "big").sequence_lengths,
            (std::vector<int32_t>{96 * 1024 * 1024 + 1}));
}

TEST(PrepareTest, WritesFilesInOrderAsUint16) {
  const mtp::testing_util::ScratchDir scratch;  // per test: ctest runs tests in parallel
  const std::string dir = scratch.path() + "/";
  std::ofstream(dir + "p1.txt") << "one\n\ntwo\n";
  std::ofstream(dir + "p2.txt") << "three";
  std::ofstream(dir + "p3.txt") << "";
  const auto sum = prepare_byte_dataset({dir + "p1.txt", dir + "p2.txt", dir + "p3.txt"},
                                        dir + "prep", DocumentSplit::kBlankLines);
  EXPECT_EQ(sum.documents, 3);
  EXPECT_EQ(sum.tokens, 5 + 5 + 6);  // every document with its EOD
  const IndexedDataset ds = read_indexed_dataset(dir + "prep");
  EXPECT_EQ(ds.dtype, IndexDType::kUint16);
  EXPECT_EQ(ds.sequence_lengths, (std::vector<int32_t>{5, 5, 6}));
  EXPECT_EQ(ds.document_indices, (std::vector<int64_t>{0, 1, 2, 3}));
  std::vector<int32_t> want = ids("one\n");
  for (const char* d : {"two\n", "three"}) {
    const auto v = ids(d);
    want.insert(want.end(), v.begin(), v.end());
  }
  EXPECT_EQ(ds.tokens, want);
  EXPECT_THROW(prepare_byte_dataset({dir + "p3.txt"}, dir + "none", DocumentSplit::kFile),
               InputError);
  EXPECT_THROW(prepare_byte_dataset({dir + "missing.txt"}, dir + "none", DocumentSplit::kFile),
               InputError);
  EXPECT_THROW(prepare_byte_dataset({dir + "p1.txt"}, "/nonexistent/dir/x", DocumentSplit::kFile),
               InputError);
}

}  // namespace
}  // namespace mtp::data
