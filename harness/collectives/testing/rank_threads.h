// File: harness/collectives/testing/rank_threads.h
//
// Test helper: runs one body per rank on `world` threads over one in-process transport, each
// with its own Communicator (ranks as threads, as the trainer runs them). A rank that throws
// aborts the transport, so the others stop instead of waiting; every rank's error is reported
// through a gtest failure naming the rank.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "harness/collectives/collectives.h"
#include "harness/transport/transport.h"

namespace mtp::collectives::testing {

/// body(rank, communicator) on ranks 0..world−1, each on its own thread.
inline void run_rank_threads(int world, const std::function<void(int, Communicator&)>& body) {
  auto tr = transport::make_in_process_transport(world, {});
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator comm(*tr, r);
        body(r, comm);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        tr->abort(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

/// The group of ranks 0..n−1, named `name`.
inline Group first_ranks(const std::string& name, int n) {
  Group g{name, {}};
  for (int r = 0; r < n; ++r) g.ranks.push_back(r);
  return g;
}

}  // namespace mtp::collectives::testing
