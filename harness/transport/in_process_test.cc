#include <gtest/gtest.h>

#include <thread>

#include "harness/transport/transport.h"

namespace mtp::transport {
namespace {

using Kind = MessageTag::Kind;

TEST(InProcessTransportTest, DeliversCopiesByTagInAnyOrder) {
  auto tr = make_in_process_transport(2, {});
  auto a = at::arange(6, at::kFloat).view({2, 3});
  tr->send(0, 1, {Kind::kActivation, 0, 1}, a);
  tr->send(0, 1, {Kind::kActivation, 0, 0}, a * 2);
  a.fill_(-1);  // the message is a copy
  auto m0 = tr->recv(1, 0, {Kind::kActivation, 0, 0}, {2, 3});
  auto m1 = tr->recv(1, 0, {Kind::kActivation, 0, 1}, {2, 3});
  EXPECT_TRUE(at::equal(m0, at::arange(6, at::kFloat).view({2, 3}) * 2));
  EXPECT_TRUE(at::equal(m1, at::arange(6, at::kFloat).view({2, 3})));
}

TEST(InProcessTransportTest, TimeoutReportsEveryRanksPendingOperation) {
  InProcessOptions opt;
  opt.timeout = std::chrono::milliseconds(50);
  auto tr = make_in_process_transport(3, opt);
  tr->note(0, "F chunk 0 mb 2");
  tr->note(2, "done");
  tr->send(0, 2, {Kind::kGradient, 1, 4}, at::zeros({1}));
  try {
    tr->recv(1, 0, {Kind::kActivation, 0, 3}, {1});
    FAIL() << "recv should time out";
  } catch (const InfraError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("rank 1: timed out after 50 ms waiting to receive activation from stage 0, "
                     "microbatch 3 from rank 0"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("rank 0: F chunk 0 mb 2"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 2: done"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 0 -> rank 2: gradient from stage 1, microbatch 4"), std::string::npos)
        << m;
  }
}

TEST(InProcessTransportTest, ShapeMismatchAndAbortAreErrors) {
  auto tr = make_in_process_transport(2, {});
  tr->send(0, 1, {Kind::kActivation, 0, 0}, at::zeros({4, 2}));
  EXPECT_THROW(tr->recv(1, 0, {Kind::kActivation, 0, 0}, {2, 2}), InfraError);
  std::thread t([&] { tr->abort("rank 0 failed: boom"); });
  try {
    tr->recv(1, 0, {Kind::kActivation, 0, 1}, {1});
    FAIL();
  } catch (const InfraError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 failed: boom"), std::string::npos);
  }
  t.join();
}

TEST(InProcessTransportTest, RandomDelaysStillDeliverEveryMessage) {
  InProcessOptions opt;
  opt.max_delay_us = 2000;
  opt.delay_seed = 7;
  auto tr = make_in_process_transport(2, opt);
  std::thread sender([&] {
    for (int mb = 0; mb < 20; ++mb) tr->send(0, 1, {Kind::kActivation, 0, mb}, at::full({1}, mb));
  });
  for (int mb = 19; mb >= 0; --mb) {
    EXPECT_EQ(tr->recv(1, 0, {Kind::kActivation, 0, mb}, {1}).item<float>(), mb);
  }
  sender.join();
}

}  // namespace
}  // namespace mtp::transport
