// Megatron indexed datasets: exact bytes written, samples read back by hand, and corrupted files
// rejected with the file, the field and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/common/error.h"
#include "harness/data/indexed_dataset.h"
#include "harness/data/microbatch.h"
#include "harness/data/token_source.h"

namespace mtp::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

void put_le(std::vector<uint8_t>& b, size_t at, uint64_t v, int size) {
  for (int i = 0; i < size; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

std::string temp_prefix(const std::string& name) { return testing::TempDir() + name; }

// Three documents: "ab\n" EOD, "cd\n" EOD, "efg" EOD (EOD = 0), 12 tokens.
const std::vector<std::vector<int32_t>> kDocs = {
    {'a', 'b', '\n', 0}, {'c', 'd', '\n', 0}, {'e', 'f', 'g', 0}};

TEST(IndexedDatasetTest, WritesMegatronBytesExactly) {
  const std::string prefix = temp_prefix("exact");
  write_indexed_dataset(prefix, kDocs, IndexDType::kUint16);
  std::vector<uint8_t> want = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0,  // magic
                               1,   0,   0,   0,   0,   0,   0,   0,     // version 1
                               8,                                        // dtype uint16
                               3,   0,   0,   0,   0,   0,   0,   0,     // sequence_count
                               4,   0,   0,   0,   0,   0,   0,   0};    // document_count
  for (int len : {4, 4, 4}) want.insert(want.end(), {static_cast<uint8_t>(len), 0, 0, 0});
  for (int ptr : {0, 8, 16}) {
    want.insert(want.end(), {static_cast<uint8_t>(ptr), 0, 0, 0, 0, 0, 0, 0});
  }
  for (int doc : {0, 1, 2, 3}) {
    want.insert(want.end(), {static_cast<uint8_t>(doc), 0, 0, 0, 0, 0, 0, 0});
  }
  EXPECT_EQ(read_all(prefix + ".idx"), want);
  EXPECT_EQ(read_all(prefix + ".bin"),
            (std::vector<uint8_t>{'a',  0, 'b', 0, '\n', 0, 0,   0, 'c', 0, 'd', 0,
                                  '\n', 0, 0,   0, 'e',  0, 'f', 0, 'g', 0, 0,   0}));
}

TEST(IndexedDatasetTest, ReadsBackEveryIntegerDtype) {
  for (IndexDType t : {IndexDType::kUint8, IndexDType::kInt8, IndexDType::kInt16,
                       IndexDType::kInt32, IndexDType::kInt64, IndexDType::kUint16}) {
    const std::string prefix = temp_prefix("dtype" + index_dtype_name(static_cast<int>(t)));
    write_indexed_dataset(prefix, kDocs, t);
    IndexedDataset ds = read_indexed_dataset(prefix);
    EXPECT_EQ(ds.dtype, t);
    EXPECT_EQ(ds.tokens,
              (std::vector<int32_t>{'a', 'b', '\n', 0, 'c', 'd', '\n', 0, 'e', 'f', 'g', 0}));
    EXPECT_EQ(ds.sequence_lengths, (std::vector<int32_t>{4, 4, 4}));
    EXPECT_EQ(ds.document_indices, (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(ds.sha256.size(), 64u);
  }
}

// Megatron's GPT dataset with the documents in order: sample j is stream tokens 4j … 4j + 4 of
// the 12-token stream repeated end to end.
TEST(IndexedDatasetTest, SamplesCrossDocumentAndEpochBoundaries) {
  const std::string prefix = temp_prefix("samples");
  write_indexed_dataset(prefix, kDocs, IndexDType::kUint16);
  MegatronSource src(prefix);
  EXPECT_EQ(src.size(), 12);
  EXPECT_EQ(src.min_vocab_size(), 'g' + 1);
  EXPECT_THAT(src.describe(), HasSubstr("3 documents, 3 sequences, 12 tokens, uint16"));
  DataConfig cfg;
  cfg.kind = "megatron";
  cfg.eod_mask_loss = true;  // eod_token 0
  MicrobatchBuilder builder(src, cfg, /*micro_batch_size=*/2, /*seq_length=*/4, 256);
  // Step 1, microbatch 0: samples 0 ("ab\n" EOD "c") and 1 ("cd\n" EOD "e").
  Microbatch m0 = builder.build(1, 0, 2);
  EXPECT_EQ(m0.tokens, (std::vector<int32_t>{'a', 'b', '\n', 0, 'c', 'd', '\n', 0}));
  EXPECT_EQ(m0.labels, (std::vector<int32_t>{'b', '\n', 0, 'c', 'd', '\n', 0, 'e'}));
  // Input EOD masked (predicting the next document's first token); label EOD counts.
  EXPECT_EQ(m0.loss_mask, (std::vector<uint8_t>{1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_EQ(m0.position_ids, (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  // Microbatch 1: sample 2 = "efg" EOD and "a" of the second epoch; sample 3 = sample 0 again.
  Microbatch m1 = builder.build(1, 1, 2);
  EXPECT_EQ(m1.tokens, (std::vector<int32_t>{'e', 'f', 'g', 0, 'a', 'b', '\n', 0}));
  EXPECT_EQ(m1.labels, (std::vector<int32_t>{'f', 'g', 0, 'a', 'b', '\n', 0, 'c'}));
  EXPECT_EQ(m1.loss_mask, (std::vector<uint8_t>{1, 1, 1, 0, 1, 1, 1, 0}));
  // Without eod_mask_loss every position counts.
  cfg.eod_mask_loss = false;
  MicrobatchBuilder plain(src, cfg, 2, 4, 256);
  EXPECT_EQ(plain.build(1, 1, 2).loss_mask, std::vector<uint8_t>(8, 1));
  // The builder asks for at least s + 1 tokens of data (s = 12 needs 13) and a vocabulary that
  // holds every id.
  EXPECT_THROW(MicrobatchBuilder(src, cfg, 1, 12, 256), InputError);
  EXPECT_THROW(MicrobatchBuilder(src, cfg, 1, 4, 'g'), InputError);  // id 'g' needs vocab 'g'+1
}

// Writes a valid dataset, lets `corrupt` change its .idx / .bin bytes, and returns the error.
std::string error_after(
    const std::string& name,
    const std::function<void(std::vector<uint8_t>&, std::vector<uint8_t>&)>& corrupt,
    IndexDType dtype = IndexDType::kUint16) {
  const std::string prefix = temp_prefix(name);
  write_indexed_dataset(prefix, kDocs, dtype);
  auto idx = read_all(prefix + ".idx"), bin = read_all(prefix + ".bin");
  corrupt(idx, bin);
  write_all(prefix + ".idx", idx);
  write_all(prefix + ".bin", bin);
  try {
    DataConfig cfg;
    cfg.kind = "megatron";
    cfg.path_prefix = prefix;
    open_token_source(cfg);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

using Bytes = std::vector<uint8_t>;

TEST(IndexedDatasetTest, RejectsCorruptedIndexNamingFieldAndRule) {
  EXPECT_THAT(error_after("magic", [](Bytes& idx, Bytes&) { idx[6] = 'Y'; }),
              AllOf(HasSubstr("magic.idx"), HasSubstr("magic at byte 0 is 4d4d49444944590000"),
                    HasSubstr("MMIDIDX")));
  EXPECT_THAT(error_after("short", [](Bytes& idx, Bytes&) { idx.resize(20); }),
              AllOf(HasSubstr("short.idx"), HasSubstr("truncated: 20 bytes"),
                    HasSubstr("header alone needs 34")));
  EXPECT_THAT(error_after("cut", [](Bytes& idx, Bytes&) { idx.resize(idx.size() - 8); }),
              AllOf(HasSubstr("cut.idx"), HasSubstr("truncated: sequence_count 3 (byte 18)"),
                    HasSubstr("the file has 94")));
  EXPECT_THAT(
      error_after("huge", [](Bytes& idx, Bytes&) { put_le(idx, 18, ~0ull, 8); }),
      AllOf(HasSubstr("huge.idx"), HasSubstr("truncated: sequence_count 18446744073709551615")));
  EXPECT_THAT(error_after("trail",
                          [](Bytes& idx, Bytes&) {
                            idx.insert(idx.end(), {1, 1, 1});
                          }),
              AllOf(HasSubstr("trail.idx"), HasSubstr("3 bytes after the document indices"),
                    HasSubstr("multimodal")));
  EXPECT_THAT(error_after("version", [](Bytes& idx, Bytes&) { idx[9] = 2; }),
              AllOf(HasSubstr("version.idx"), HasSubstr("version at byte 9 is 2, expected 1")));
  EXPECT_THAT(error_after("code9", [](Bytes& idx, Bytes&) { idx[17] = 9; }),
              AllOf(HasSubstr("code9.idx"), HasSubstr("dtype code at byte 17 is 9"),
                    HasSubstr("8 uint16")));
  EXPECT_THAT(error_after("code0", [](Bytes& idx, Bytes&) { idx[17] = 0; }),
              HasSubstr("dtype code at byte 17 is 0"));
  EXPECT_THAT(error_after("float", [](Bytes& idx, Bytes&) { idx[17] = 7; }),
              AllOf(HasSubstr("dtype code at byte 17 is 7 (float32)"), HasSubstr("integer")));
  // sequence_lengths start at byte 34, pointers at 46, document_indices at 70.
  EXPECT_THAT(error_after("neglen", [](Bytes& idx, Bytes&) { put_le(idx, 38, 0xffffffff, 4); }),
              AllOf(HasSubstr("neglen.idx"), HasSubstr("sequence_lengths[1] at byte 38 is -1")));
  EXPECT_THAT(error_after("doc0", [](Bytes& idx, Bytes&) { idx[70] = 1; }),
              HasSubstr("document_indices[0] at byte 70 is 1, expected 0"));
  EXPECT_THAT(error_after("docdown", [](Bytes& idx, Bytes&) { idx[86] = 0; }),
              HasSubstr("document_indices[2] at byte 86 is 0, less than the entry before (1)"));
  EXPECT_THAT(error_after("doclast", [](Bytes& idx, Bytes&) { idx[94] = 2; }),
              HasSubstr("document_indices[3] at byte 94 is 2, expected sequence_count 3"));
}

TEST(IndexedDatasetTest, RejectsSequencesPastTheEndAndBadTokens) {
  // Sequence 2 claims 100 tokens: bytes [16, 216) of a 24-byte .bin.
  EXPECT_THAT(
      error_after("long", [](Bytes& idx, Bytes&) { put_le(idx, 42, 100, 4); }),
      AllOf(HasSubstr("long.idx"), HasSubstr("sequence 2"),
            HasSubstr("sequence_pointers[2] at byte 62 = 16"), HasSubstr("spans bytes [16, 216)"),
            HasSubstr("long.bin"), HasSubstr("must lie inside the data file")));
  EXPECT_THAT(error_after("binshort", [](Bytes&, Bytes& bin) { bin.resize(22); }),
              AllOf(HasSubstr("sequence 2"), HasSubstr("spans bytes [16, 24)"),
                    HasSubstr("which has 22 bytes")));
  EXPECT_THAT(error_after("negptr", [](Bytes& idx, Bytes&) { put_le(idx, 54, ~0ull, 8); }),
              HasSubstr("sequence_pointers[1] at byte 54 = -1"));
  // int16 0xffff = −1 as the first token of sequence 1 (byte 8 of the .bin).
  EXPECT_THAT(error_after(
                  "negtok", [](Bytes&, Bytes& bin) { bin[8] = bin[9] = 0xff; }, IndexDType::kInt16),
              AllOf(HasSubstr("negtok.bin"), HasSubstr("token 0 of sequence 1 at byte 8 is -1")));
  EXPECT_THAT(error_after("empty",
                          [](Bytes& idx, Bytes&) {
                            for (size_t at : {34, 38, 42}) put_le(idx, at, 0, 4);
                          }),
              HasSubstr("holds no tokens"));
}

/// Writes PREFIX.idx with `lengths` and `pointers` (one document) and PREFIX.bin = `bin`.
std::string write_raw(const std::string& name, IndexDType dtype,
                      const std::vector<int32_t>& lengths, const std::vector<int64_t>& pointers,
                      const std::vector<uint8_t>& bin) {
  const std::string prefix = temp_prefix(name);
  const size_t n = lengths.size();
  std::vector<uint8_t> idx(34 + 12 * n + 16, 0);
  std::memcpy(idx.data(), "MMIDIDX\0\0", 9);
  put_le(idx, 9, 1, 8);
  idx[17] = static_cast<uint8_t>(dtype);
  put_le(idx, 18, n, 8);
  put_le(idx, 26, 2, 8);  // document_indices = [0, n]: one document
  for (size_t i = 0; i < n; ++i) {
    put_le(idx, 34 + 4 * i, static_cast<uint32_t>(lengths[i]), 4);
    put_le(idx, 34 + 4 * n + 8 * i, static_cast<uint64_t>(pointers[i]), 8);
  }
  put_le(idx, 34 + 12 * n + 8, n, 8);
  write_all(prefix + ".idx", idx);
  write_all(prefix + ".bin", bin);
  return prefix;
}

// Issue 19 defect 4: 4,000 sequences of a 48 KB index, all at byte 0 of a 2 MiB .bin, declare
// 4 Gi tokens; the reader decoded them all into a vector (16 GiB) and ended in std::bad_alloc
// after 10 s. Now the source decodes what a sample reads, checking every slot of the .bin once:
// the stream (and so every sample) is what it was, and opening takes milliseconds.
TEST(IndexedDatasetTest, OverlappingSequencesAreReadAsTheyGoNotExpanded) {
  constexpr int32_t kLen = 1 << 20;  // uint16 tokens: the whole 2 MiB .bin
  std::vector<uint8_t> bin(2 * static_cast<size_t>(kLen));
  for (int32_t k = 0; k < kLen; ++k) put_le(bin, 2 * static_cast<size_t>(k), k % 251, 2);
  const std::string prefix =
      write_raw("bomb", IndexDType::kUint16, std::vector<int32_t>(4000, kLen),
                std::vector<int64_t>(4000, 0), bin);
  EXPECT_EQ(read_all(prefix + ".idx").size(), 48050u);
  DataConfig cfg;
  cfg.kind = "megatron";
  cfg.path_prefix = prefix;
  const auto start = std::chrono::steady_clock::now();
  const std::unique_ptr<TokenSource> src = open_token_source(cfg);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(src->size(), int64_t{4000} * kLen);
  EXPECT_EQ(src->min_vocab_size(), 251);
  EXPECT_THAT(src->describe(), HasSubstr("1 documents, 4000 sequences, 4194304000 tokens"));
  std::vector<int32_t> got(4);
  src->read(int64_t{3999} * kLen + 1000, 4, got.data());  // inside the last sequence
  EXPECT_EQ(got, (std::vector<int32_t>{1000 % 251, 1001 % 251, 1002 % 251, 1003 % 251}));
  src->read(kLen - 2, 4, got.data());  // across sequences 0 and 1
  EXPECT_EQ(got, (std::vector<int32_t>{(kLen - 2) % 251, (kLen - 1) % 251, 0, 1}));
  MicrobatchBuilder builder(*src, cfg, /*micro_batch_size=*/1, /*seq_length=*/4, 256);
  EXPECT_EQ(builder.build(1, 0, 1).tokens, (std::vector<int32_t>{0, 1, 2, 3}));
  // Decoding the whole stream into a vector is refused by name (more than 4 × the .bin).
  try {
    read_indexed_dataset(prefix);
    ADD_FAILURE() << "a 4 Gi token stream was decoded into memory";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bomb.idx': sequences 0 to 4 declare 5242880 tokens "
                                    "(10485760 bytes of uint16), more than 4 times the 2097152 "
                                    "bytes of '"));
  }
}

// Overlapping and misaligned sequences: every slot is checked once, and an invalid id is named
// by the first sequence in stream order that reads it.
TEST(IndexedDatasetTest, InvalidTokensOfOverlappingSequencesAreNamedInStreamOrder) {
  // int16 at even bytes: 1, -1, 2; at odd bytes: 0xff00 = -256 (byte 1), 0x02ff = 767 (byte 3).
  const std::vector<uint8_t> bin = {0x01, 0x00, 0xff, 0xff, 0x02, 0x00};
  auto stream_of = [&](const std::vector<int32_t>& lengths, const std::vector<int64_t>& pointers) {
    try {
      MegatronSource src(write_raw("overlap", IndexDType::kInt16, lengths, pointers, bin));
      std::vector<int32_t> all(static_cast<size_t>(src.size()));
      src.read(0, src.size(), all.data());
      return fmt::format("{} (vocab {})", fmt::join(all, " "), src.min_vocab_size());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(stream_of({1, 1, 1}, {0, 4, 0}), "1 2 1 (vocab 3)");  // the -1 is never read
  EXPECT_EQ(stream_of({1, 1}, {0, 3}), "1 767 (vocab 768)");      // a misaligned sequence
  EXPECT_THAT(stream_of({1}, {1}), HasSubstr("token 0 of sequence 0 at byte 1 is -256"));
  EXPECT_THAT(stream_of({1, 3, 2}, {4, 0, 2}), HasSubstr("token 1 of sequence 1 at byte 2 is -1"));
}

TEST(IndexedDatasetTest, MissingFilesAndPrefix) {
  DataConfig cfg;
  cfg.kind = "megatron";
  EXPECT_THROW(open_token_source(cfg), InputError);  // no path_prefix
  cfg.path_prefix = "/nonexistent/corpus";
  try {
    open_token_source(cfg);
    FAIL() << "accepted a missing dataset";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/corpus.idx' does not exist"));
  }
  const std::string prefix = temp_prefix("nobin");
  write_indexed_dataset(prefix, kDocs, IndexDType::kUint16);
  std::remove((prefix + ".bin").c_str());
  cfg.path_prefix = prefix;
  try {
    open_token_source(cfg);
    FAIL() << "accepted a dataset without .bin";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nobin.bin' does not exist"));
  }
}

TEST(IndexedDatasetTest, WriterRejectsIdsOutsideTheDtype) {
  EXPECT_THROW(write_indexed_dataset(temp_prefix("u8"), {{1, 256}}, IndexDType::kUint8),
               InputError);
  EXPECT_THROW(write_indexed_dataset(temp_prefix("neg"), {{-1}}, IndexDType::kInt32), InputError);
}

}  // namespace
}  // namespace mtp::data
