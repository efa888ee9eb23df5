// Tests of the enum name tables: every value round-trips through its spelling, and a wrong
// spelling is an InputError that quotes it and lists the accepted ones.
#include "harness/config/enums.h"

#include <gtest/gtest.h>

namespace mtp::config {
namespace {

template <class E>
void expect_round_trip() {
  for (const auto& [value, name] : EnumTable<E>::kValues) {
    EXPECT_EQ(enum_name(value), name);
    EXPECT_EQ(parse_enum<E>(name), value);
  }
}

TEST(EnumsTest, EveryValueRoundTripsThroughItsName) {
  expect_round_trip<Implementation>();
  expect_round_trip<DType>();
  expect_round_trip<Device>();
  expect_round_trip<Kernels>();
  expect_round_trip<Optimizer>();
  expect_round_trip<EmbeddingCopyUpdate>();
  EXPECT_EQ(enum_name(Optimizer::kDistributedAdam), "distributed_adam");
  EXPECT_EQ(enum_name(Implementation::kCandidate), "candidate");
}

TEST(EnumsTest, UnknownNameListsTheAcceptedOnes) {
  try {
    parse_enum<Optimizer>("sgd");
    ADD_FAILURE() << "accepted \"sgd\"";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "optimizer = \"sgd\": accepted \"adam\", \"distributed_adam\"");
  }
  try {
    parse_enum<Device>("CPU", "[training].device");
    ADD_FAILURE() << "accepted \"CPU\" (names are case-sensitive)";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "[training].device = \"CPU\": accepted \"cpu\", \"cuda\"");
  }
  // A value holding a newline, a NUL or a quote is shown escaped, whole, on one line.
  try {
    parse_enum<Device>(std::string_view("cp\nu\0x\"", 7), "[training].device");
    ADD_FAILURE() << "accepted a value with control characters";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "[training].device = \"cp\\nu\\x00x\\\"\": accepted \"cpu\", \"cuda\"");
  }
  EXPECT_EQ(accepted_names<Kernels>(), "\"torch\", \"harness\"");
  EXPECT_EQ(enum_names<RecordMode>(), (std::vector<std::string>{"full", "digest", "auto"}));
  EXPECT_EQ(enum_names<DType>(), (std::vector<std::string>{"float32", "float64", "bfloat16"}));
}

}  // namespace
}  // namespace mtp::config
