#include "harness/record/record.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "harness/record/h5.h"
#include "harness/record/record_test_util.h"

namespace mtp::record {
namespace {

using ::mtp::testing_util::FileSizeLimit;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using testing_util::read_bytes;
using testing_util::ScratchDir;

/// A tensor of `dtype` whose bytes are 0, 1, 2, ... (any bit pattern is a valid element).
TensorData pattern(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  TensorData t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(static_cast<size_t>(t.numel() * dtype_size(dtype)));
  for (size_t i = 0; i < t.bytes.size(); ++i) {
    t.bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  }
  return t;
}

void expect_same(const TensorData& got, const TensorData& want) {
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.dtype, want.dtype) << want.name;
  EXPECT_EQ(got.shape, want.shape) << want.name;
  EXPECT_EQ(got.bytes, want.bytes) << want.name;
}

/// Writes a small but complete record to `path`.
void write_sample(const std::string& path) {
  RecordWriter w(path);
  w.set_attr("hidden_size", int64_t{64});
  w.set_attr("mtp_loss_scaling_factor", 0.1);
  w.set_attr("layout", std::string("E|t*3|tm|L"));
  w.write(
      0, "weight",
      TensorData::from_f32("embedding.word_embeddings.weight", {2, 2}, {1.0f, 2.0f, 3.0f, 4.0f}));
  w.write(1, "batch", TensorData::from_i32("tokens", {1, 1, 3}, {5, 6, 7}));
  w.write(1, "loss", TensorData::from_f32("lm", {}, {2.5f}));
  w.write(1, "grad", pattern("embedding.word_embeddings.weight", DType::kF32, {2, 2}));
  w.write(1, "weight", pattern("embedding.word_embeddings.weight", DType::kF32, {2, 2}));
  w.set_step_attr(1, "grad_norm", 0.75);
  w.commit();
}

TEST(RecordTest, RoundTripsEveryDTypeBitForBit) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  std::vector<TensorData> tensors;
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64,
                  DType::kU8}) {
    tensors.push_back(pattern(std::string("t_") + dtype_name(d), d, {3, 5}));
  }
  // Special float bit patterns: -0, NaN with a payload, signalling NaN, denormal, inf.
  tensors.push_back(TensorData::from_f32(
      "specials", {5},
      {-0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
       std::numeric_limits<float>::denorm_min(), 1.0f}));
  uint32_t payload_nan = 0x7fa00001u;  // signalling NaN with a payload
  std::memcpy(tensors.back().bytes.data() + 4, &payload_nan, 4);
  {
    RecordWriter w(path);
    for (const TensorData& t : tensors) {
      w.write(3, "grad", t);
    }
    w.commit();
  }
  RecordReader r(path);
  EXPECT_EQ(r.path(), path);
  EXPECT_THAT(r.steps(), ElementsAre(3));
  EXPECT_THAT(r.groups(3), ElementsAre("grad"));
  for (const TensorData& t : tensors) {
    expect_same(r.read(3, "grad", t.name), t);
    TensorData d = r.describe(3, "grad", t.name);
    EXPECT_EQ(d.dtype, t.dtype);
    EXPECT_EQ(d.shape, t.shape);
    EXPECT_TRUE(d.bytes.empty());
  }
}

TEST(RecordTest, RoundTripsScalarsAndEmptyTensors) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  TensorData loss = TensorData::from_f32("lm", {}, {3.25f});
  TensorData total = TensorData::from_f64("total", {}, {-1.5});
  TensorData empty = TensorData::from_f32("empty", {2, 0}, {});
  TensorData zero = TensorData::from_i32("zero_len", {0}, {});
  {
    RecordWriter w(path);
    for (const TensorData& t : {loss, total, empty, zero}) {
      w.write(1, "loss", t);
    }
    w.commit();
  }
  RecordReader r(path);
  for (const TensorData& t : {loss, total, empty, zero}) {
    expect_same(r.read(1, "loss", t.name), t);
  }
  EXPECT_TRUE(r.describe(1, "loss", "lm").shape.empty());
  EXPECT_EQ(r.describe(1, "loss", "lm").numel(), 1);
}

TEST(RecordTest, RoundTripsRootAndStepAttributes) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  {
    RecordWriter w(path);
    w.set_attr("num_layers", int64_t{-3});
    w.set_attr("big", std::numeric_limits<int64_t>::max());
    w.set_attr("norm_epsilon", 1e-5);
    w.set_attr("layout", std::string("E|t*3|(t|)*4tm|L"));
    w.set_attr("empty", std::string());
    w.set_attr("unicode", std::string("λ = 0.1"));
    w.set_attr("replaced", int64_t{1});
    w.set_attr("replaced", std::string("now a string"));
    w.set_step_attr(2, "grad_norm", 0.125);
    w.set_step_attr(2, "clip_coeff", 1.0);
    w.set_step_attr(2, "note", std::string("x"));
    w.write(2, "loss", TensorData::from_f32("lm", {}, {1.0f}));
    w.write(4, "loss", TensorData::from_f32("lm", {}, {1.0f}));
    w.commit();
  }
  RecordReader r(path);
  AttrMap want{{"num_layers", int64_t{-3}},
               {"big", std::numeric_limits<int64_t>::max()},
               {"norm_epsilon", 1e-5},
               {"layout", std::string("E|t*3|(t|)*4tm|L")},
               {"empty", std::string()},
               {"unicode", std::string("λ = 0.1")},
               {"replaced", std::string("now a string")},
               {"schema_version", kSchemaVersion}};  // every record names its format version
  EXPECT_EQ(r.attrs(), want);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  AttrMap want_step{{"grad_norm", 0.125}, {"clip_coeff", 1.0}, {"note", std::string("x")}};
  EXPECT_EQ(r.step_attrs(2), want_step);
  EXPECT_TRUE(r.step_attrs(4).empty());
  EXPECT_THROW(r.step_attrs(3), RecordError);
}

TEST(RecordTest, StepAttributeCreatesTheStep) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  {
    RecordWriter w(path);
    w.set_step_attr(7, "grad_norm", 2.0);
    w.commit();
  }
  RecordReader r(path);
  EXPECT_THAT(r.steps(), ElementsAre(7));
  EXPECT_TRUE(r.groups(7).empty());
  EXPECT_EQ(r.step_attrs(7), (AttrMap{{"grad_norm", 2.0}}));
}

TEST(RecordTest, ListsNamesInCreationOrderGroupsCanonicallyStepsAscending) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  {
    RecordWriter w(path);
    w.write(10, "weight", TensorData::from_f32("zeta", {1}, {1.0f}));
    w.write(10, "weight", TensorData::from_f32("alpha", {1}, {1.0f}));
    w.write(10, "weight", TensorData::from_f32("mid", {1}, {1.0f}));
    w.write(10, "loss", TensorData::from_f32("total", {}, {1.0f}));
    w.write(10, "loss", TensorData::from_f32("mtp_1", {}, {1.0f}));
    w.write(10, "loss", TensorData::from_f32("lm", {}, {1.0f}));
    w.write(10, "batch", TensorData::from_i32("tokens", {1}, {1}));
    w.write(2, "grad", TensorData::from_f32("b", {1}, {1.0f}));
    w.write(2, "grad", TensorData::from_f32("a", {1}, {1.0f}));
    w.commit();
  }
  RecordReader r(path);
  EXPECT_THAT(r.steps(), ElementsAre(2, 10));
  EXPECT_THAT(r.groups(10), ElementsAre("batch", "loss", "weight"));
  EXPECT_THAT(r.names(10, "weight"), ElementsAre("zeta", "alpha", "mid"));
  EXPECT_THAT(r.names(10, "loss"), ElementsAre("total", "mtp_1", "lm"));
  EXPECT_THAT(r.names(2, "grad"), ElementsAre("b", "a"));
}

TEST(RecordTest, ManyNamesKeepCreationOrder) {
  // Past HDF5's compact-link limit (8) a group switches to dense storage; order must survive.
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  std::vector<std::string> names;
  {
    RecordWriter w(path);
    for (int i = 0; i < 40; ++i) {
      names.push_back("p" + std::to_string((i * 17) % 40));
      w.write(1, "grad", TensorData::from_f32(names.back(), {1}, {static_cast<float>(i)}));
    }
    w.commit();
  }
  RecordReader r(path);
  EXPECT_EQ(r.names(1, "grad"), names);
  EXPECT_EQ(r.read(1, "grad", "p17").bytes, TensorData::from_f32("", {1}, {1.0f}).bytes);
}

// A group of more than 256 tensors (an MoE model: 1,024 experts per layer make 16,000) moves to
// dense link storage: compact storage costs about n^3 to write (4,000 links took 59 s, 16,000
// hours). Order, values and deterministic bytes must survive; the reader indexes such a file in a
// child process first (a corrupted fractal heap may crash HDF5 1.10).
TEST(RecordTest, AGroupOfThousandsOfTensorsIsWrittenInDenseStorageAndReadsBack) {
  ScratchDir dir;
  std::vector<std::string> names;
  auto write = [&](const std::string& path) {
    names.clear();
    RecordWriter w(path);
    for (int i = 0; i < 6000; ++i) {
      names.push_back(
          fmt::format("decoder.layers.{}.mlp.experts.local_experts.{}.linear_fc1.weight", i % 8,
                      (i * 4099) % 6000));
      w.write(1, "grad", TensorData::from_f32(names.back(), {2}, {static_cast<float>(i), 0.5f}));
    }
    w.write(1, "weight", TensorData::from_f32("w", {1}, {1.0f}));
    w.commit();
  };
  write(dir.file("a.h5"));
  write(dir.file("b.h5"));
  EXPECT_TRUE(read_bytes(dir.file("a.h5")) == read_bytes(dir.file("b.h5")));
  {
    const h5::File f = h5::File::open_read(dir.file("a.h5"));
    EXPECT_TRUE(f.root().open_group("steps/000001/grad").has_dense_links());
    EXPECT_FALSE(f.root().open_group("steps/000001/weight").has_dense_links());
  }
  RecordReader r(dir.file("a.h5"));
  EXPECT_EQ(r.names(1, "grad"), names);
  EXPECT_EQ(r.read(1, "grad", names[4321]).bytes,
            TensorData::from_f32("", {2}, {4321.0f, 0.5f}).bytes);
}

TEST(RecordTest, SameContentGivesTheSameBytes) {
  ScratchDir dir;
  write_sample(dir.file("a.h5"));
  write_sample(dir.file("b.h5"));
  std::vector<char> a = read_bytes(dir.file("a.h5"));
  std::vector<char> b = read_bytes(dir.file("b.h5"));
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == b) << "two records with the same content differ in their bytes";
}

TEST(RecordTest, CommitRenamesTheTemporaryFile) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  RecordWriter w(path);
  w.write(1, "loss", TensorData::from_f32("lm", {}, {1.0f}));
  ASSERT_EQ(dir.entries().size(), 1u);
  EXPECT_THAT(dir.entries()[0],
              MatchesRegex("r\\.h5\\.tmp-" + std::to_string(::getpid()) + "-[0-9a-f]{12}"));
  w.commit();
  EXPECT_THAT(dir.entries(), ElementsAre("r.h5"));
  // A committed writer refuses further work.
  EXPECT_THROW(w.write(1, "loss", TensorData::from_f32("x", {}, {1.0f})), RecordError);
  EXPECT_THROW(w.commit(), RecordError);
}

TEST(RecordTest, TwoWritersOfOnePathNeverShareATemporary) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  {
    RecordWriter a(path);
    RecordWriter b(path);
    a.write(1, "loss", TensorData::from_f32("lm", {}, {1.0f}));
    b.write(2, "loss", TensorData::from_f32("lm", {}, {2.0f}));
    EXPECT_EQ(dir.entries().size(), 2u);
    a.commit();
    EXPECT_THAT(RecordReader(path).steps(), ElementsAre(1));
    b.commit();
  }
  EXPECT_THAT(RecordReader(path).steps(), ElementsAre(2));
  EXPECT_THAT(dir.entries(), ElementsAre("r.h5"));
}

TEST(RecordTest, PlantedSymlinkAtTheOldTemporaryNameIsNotFollowed) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  std::ofstream(dir.file("victim")) << "precious";
  std::filesystem::create_symlink(dir.file("victim"), path + ".tmp-" + std::to_string(::getpid()));
  write_sample(path);
  EXPECT_EQ(testing_util::read_bytes(dir.file("victim")).size(), 8u);
  EXPECT_FALSE(RecordReader(path).steps().empty());
}

// Defect: a full disk made HDF5's close fail in commit(), and HDF5 closed the file again at exit
// and crashed (SIGSEGV after the error was reported). Each case runs in a child process, which
// must report the fault, leave no file, and exit normally.
TEST(RecordTest, FullDiskIsAReportedFaultThatLeavesNothingAndDoesNotCrash) {
  struct Case {
    const char* name;
    rlim_t limit;     // file size limit: where the "disk" fills up
    size_t elements;  // float32 elements of each of 4 tensors
    bool fails_in_commit;
  };
  for (const Case& c : {Case{"data write fails", 16 * 1024, 64 * 1024, false},
                        Case{"flush at close fails", 4 * 1024, 256, true}}) {
    ScratchDir dir;
    EXPECT_EXIT(
        {
          FileSizeLimit full(c.limit);
          int code = 10;
          try {
            RecordWriter w(dir.file("r.h5"));
            std::vector<float> v(c.elements, 0.5f);
            for (int i = 0; i < 4; ++i) {
              w.write(1, "grad",
                      TensorData::from_f32("w" + std::to_string(i),
                                           {static_cast<int64_t>(c.elements)}, v));
            }
            code = 11;
            w.commit();
            code = 12;
          } catch (const RecordWriteError&) {
          }
          std::exit(dir.entries().empty() ? code : 13);
        },
        ::testing::ExitedWithCode(c.fails_in_commit ? 11 : 10), "")
        << c.name;
    EXPECT_THAT(dir.entries(), IsEmpty()) << c.name;
  }
}

TEST(RecordTest, CommitReplacesAnExistingRecord) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  write_sample(path);
  {
    RecordWriter w(path);
    w.write(5, "loss", TensorData::from_f32("lm", {}, {1.0f}));
    w.commit();
  }
  EXPECT_THAT(RecordReader(path).steps(), ElementsAre(5));
}

TEST(RecordTest, WriterWithoutCommitLeavesNoFile) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  {
    RecordWriter w(path);
    w.set_attr("x", int64_t{1});
    w.write(1, "loss", TensorData::from_f32("lm", {}, {1.0f}));
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(RecordTest, AbandonedWriterKeepsAnEarlierRecord) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  write_sample(path);
  std::vector<char> before = read_bytes(path);
  {
    RecordWriter w(path);
    w.write(9, "loss", TensorData::from_f32("lm", {}, {1.0f}));
  }
  EXPECT_THAT(dir.entries(), ElementsAre("r.h5"));
  EXPECT_TRUE(read_bytes(path) == before);
}

TEST(RecordTest, RejectsBadWrites) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  RecordWriter w(path);
  TensorData t = TensorData::from_f32("lm", {}, {1.0f});
  w.write(1, "loss", t);
  auto expect_error = [&](auto&& fn, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected one mentioning: " << part;
    } catch (const RecordError& e) {
      EXPECT_THAT(e.what(), HasSubstr(part));
      EXPECT_THAT(e.what(), HasSubstr(path));
    }
  };
  expect_error([&] { w.write(1, "loss", t); }, "written twice");
  expect_error([&] { w.write(1, "grads", t); }, "unknown group");
  expect_error([&] { w.write(1, "", t); }, "unknown group");
  expect_error([&] { w.write(1, "loss", TensorData::from_f32("a/b", {}, {1.0f})); }, "'/'");
  expect_error([&] { w.write(1, "loss", TensorData::from_f32("", {}, {1.0f})); }, "empty");
  expect_error([&] { w.write(1, "loss", TensorData::from_f32(".", {}, {1.0f})); }, "not a valid");
  expect_error([&] { w.write(-1, "loss", t); }, "step");
  expect_error([&] { w.write(1000000, "loss", t); }, "step");
  expect_error([&] { w.set_step_attr(-1, "grad_norm", 1.0); }, "step outside");
  TensorData short_bytes = TensorData::from_f32("s", {2}, {1.0f, 2.0f});
  short_bytes.bytes.pop_back();
  expect_error([&] { w.write(1, "loss", short_bytes); }, "7 bytes given");
  TensorData negative = TensorData::from_f32("n", {}, {1.0f});
  negative.shape = {-1};
  expect_error([&] { w.write(1, "loss", negative); }, "negative dimension");
  // The writer still works after rejected writes.
  w.write(1, "loss", TensorData::from_f32("mtp_1", {}, {2.0f}));
  w.commit();
  RecordReader r(path);
  EXPECT_THAT(r.names(1, "loss"), ElementsAre("lm", "mtp_1"));
}

TEST(RecordTest, WriterNeedsAnExistingParentDirectory) {
  ScratchDir dir;
  std::string path = dir.file("missing/r.h5");
  try {
    RecordWriter w(path);
    ADD_FAILURE() << "no error";
  } catch (const RecordError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_THAT(e.what(), HasSubstr("parent directory"));
  }
}

TEST(RecordTest, StepGroupNames) {
  EXPECT_EQ(step_group_name(0), "000000");
  EXPECT_EQ(step_group_name(7), "000007");
  EXPECT_EQ(step_group_name(999999), "999999");
  EXPECT_THROW(step_group_name(-1), RecordError);
  EXPECT_THROW(step_group_name(1000000), RecordError);
}

TEST(RecordTest, ReaderRejectsUnknownSelections) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  write_sample(path);
  RecordReader r(path);
  EXPECT_THAT(r.steps(), ElementsAre(0, 1));
  EXPECT_THAT(r.groups(0), ElementsAre("weight"));
  EXPECT_THAT(r.groups(1), ElementsAre("batch", "loss", "grad", "weight"));
  EXPECT_THROW(r.groups(2), RecordError);
  EXPECT_THROW(r.names(0, "grad"), RecordError);
  EXPECT_THROW(r.names(1, "bogus"), RecordError);
  EXPECT_THROW(r.read(1, "loss", "mtp_1"), RecordError);
  EXPECT_THROW(r.describe(1, "loss", "mtp_1"), RecordError);
  try {
    r.read(1, "loss", "nope");
  } catch (const RecordError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_THAT(e.what(), HasSubstr("nope"));
  }
}

TEST(RecordTest, EveryTensorCarriesTheDigestOfItsBytes) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  const TensorData big = pattern("w", DType::kF32, {3, kDigestBlockElements / 2 + 5});  // 2 blocks
  const TensorData scalar = TensorData::from_f32("lm", {}, {2.5f});
  const TensorData empty = pattern("e", DType::kBF16, {0, 4});
  {
    RecordWriter w(path);
    w.write(1, "grad", big);
    w.write(1, "loss", scalar);
    w.write(1, "weight", empty);
    w.commit();
  }
  RecordReader r(path);
  const TensorInfo& i = r.info(1, "grad", "w");
  EXPECT_TRUE(i.stored);
  EXPECT_EQ(i.shape, big.shape);
  ASSERT_TRUE(i.digest.has_value());
  const TensorDigest want = digest_bytes(big.bytes.data(), big.bytes.size(), 4);
  EXPECT_EQ(*i.digest, want.whole);
  const TensorDigest blocks = r.block_digests(1, "grad", "w");
  ASSERT_EQ(blocks.blocks.size(), 2u);
  EXPECT_EQ(blocks.first_differing_block(want), std::nullopt);
  // The raw bytes sit at raw_offset in the file, as the fast comparison reads them.
  const std::optional<uint64_t> raw = r.raw_offset(1, "grad", "w");
  ASSERT_TRUE(raw.has_value());
  const std::vector<char> file = read_bytes(path);
  ASSERT_LE(*raw + big.bytes.size(), file.size());
  EXPECT_EQ(std::memcmp(file.data() + *raw, big.bytes.data(), big.bytes.size()), 0);
  EXPECT_EQ(r.block_digests(1, "loss", "lm").blocks.size(), 1u);
  EXPECT_EQ(*r.info(1, "loss", "lm").digest, digest_bytes(scalar.bytes.data(), 4, 4).whole);
  EXPECT_TRUE(r.block_digests(1, "weight", "e").blocks.empty());
  expect_same(r.read(1, "grad", "w"), big);
}

TEST(RecordTest, DigestOnlyTensorsKeepShapeDtypeAndDigestButNoBytes) {
  ScratchDir dir;
  std::string full_path = dir.file("full.h5"), digest_path = dir.file("digest.h5");
  const TensorData w = pattern("decoder.w", DType::kBF16, {5, 7, 3});
  const TensorData scalar = TensorData::from_f64("total", {}, {1.25});
  for (const auto& [path, storage] :
       {std::pair{full_path, Storage::kFull}, std::pair{digest_path, Storage::kDigest}}) {
    RecordWriter rw(path);
    rw.write(1, "weight", w, storage);
    rw.write(1, "loss", scalar, storage);
    rw.commit();
  }
  RecordReader full(full_path), digest(digest_path);
  for (const std::string& name : {std::string("decoder.w")}) {
    const TensorInfo& d = digest.info(1, "weight", name);
    EXPECT_FALSE(d.stored);
    EXPECT_EQ(d.dtype, DType::kBF16);
    EXPECT_EQ(d.shape, w.shape);
    EXPECT_EQ(*d.digest, *full.info(1, "weight", name).digest);
    EXPECT_FALSE(digest.raw_offset(1, "weight", name).has_value());
    EXPECT_EQ(digest.describe(1, "weight", name).shape, w.shape);
  }
  EXPECT_EQ(digest.info(1, "loss", "total").shape, std::vector<int64_t>{});
  EXPECT_EQ(*digest.info(1, "loss", "total").digest, *full.info(1, "loss", "total").digest);
  try {
    digest.read(1, "weight", "decoder.w");
    ADD_FAILURE() << "read a digest-only tensor";
  } catch (const RecordError& e) {
    EXPECT_THAT(e.what(), HasSubstr(digest_path));
    EXPECT_THAT(e.what(), HasSubstr("/steps/000001/weight/decoder.w"));
    EXPECT_THAT(e.what(), HasSubstr("holds only the tensor's digest"));
  }
  // A digest-only record is a fraction of the full one.
  EXPECT_LT(std::filesystem::file_size(digest_path), std::filesystem::file_size(full_path));
}

TEST(RecordTest, ReaderIsMovable) {
  ScratchDir dir;
  std::string path = dir.file("r.h5");
  write_sample(path);
  RecordReader a(path);
  RecordReader b(std::move(a));
  EXPECT_EQ(b.path(), path);
  EXPECT_EQ(b.read(1, "loss", "lm").bytes, TensorData::from_f32("lm", {}, {2.5f}).bytes);
}

}  // namespace
}  // namespace mtp::record
