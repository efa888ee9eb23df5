// data prepare: documents per file or per blank-line block, the EOD after each, and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "harness/common/error.h"
#include "harness/data/indexed_dataset.h"
#include "harness/data/prepare.h"

namespace mtp::data {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

std::vector<int32_t> ids(const std::string& s, bool eod = true) {
  std::vector<int32_t> v(s.begin(), s.end());
  if (eod) v.push_back(kByteLevelEod);
  return v;
}

TEST(PrepareTest, BlankLineBlocksAreDocuments) {
  // Blank lines (empty, or only spaces, tabs, CR) separate documents and belong to none.
  const auto docs = byte_documents("t", bytes_of("\nab\ncd\n \t\r\n\nef\r\nx"),
                                   DocumentSplit::kBlankLines);
  EXPECT_EQ(docs, (std::vector<std::vector<int32_t>>{ids("ab\ncd\n"), ids("ef\r\nx")}));
  EXPECT_TRUE(byte_documents("t", bytes_of("\n \n"), DocumentSplit::kBlankLines).empty());
}

TEST(PrepareTest, WholeFileIsOneDocument) {
  EXPECT_EQ(byte_documents("t", bytes_of("ab\n\ncd"), DocumentSplit::kFile),
            (std::vector<std::vector<int32_t>>{ids("ab\n\ncd")}));
  EXPECT_TRUE(byte_documents("t", {}, DocumentSplit::kFile).empty());
}

TEST(PrepareTest, RejectsTheEodByteNamingFileAndOffset) {
  try {
    byte_documents("notes.txt", {'a', 'b', 0, 'c'}, DocumentSplit::kFile);
    FAIL() << "accepted a 0 byte";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'notes.txt' has a 0 byte at offset 2"));
  }
  EXPECT_THROW(parse_document_split("paragraph"), InputError);
}

TEST(PrepareTest, WritesFilesInOrderAsUint16) {
  const std::string dir = testing::TempDir();
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
