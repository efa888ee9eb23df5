// File: kernels/testing/op_count.h
//
// The host's work in one region, counted: every ATen operator the dispatcher runs (RecordScope
// FUNCTION: nested ones too, as the profiler lists them), the dispatched ones among them (called
// by no other operator) and every autograd node whose backward runs (BACKWARD_FUNCTION), on
// every thread of the process (rank threads, autograd's
// device threads, side threads). An eager step is bound by the host when these are many (issue
// 25 §4: ~1,100 top-level operators per small-model microbatch), and the counts are the same on
// every machine and device kind for the same code, so they measure host overhead where timings
// cannot (the CPU build machine) and show what a change removed. Works with LibTorch 1.13 and
// 2.x (RecordFunction's global callbacks); header-only.
//
// Example:
//   mtp::bench::OpCount count(/*by_name=*/true);   // counting from here
//   step();
//   count.stop();
//   state.counters["dispatched_ops"] = count.dispatched();
//   count.print_top(stderr, 20);
#pragma once

#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mtp::bench {

/// OpCount: counts operators and autograd nodes between construction and stop() (or
/// destruction). One at a time per process (the callbacks count into process-wide counters);
/// by_name also keeps a histogram by operator or node name (slower: a mutex per event). Throws
/// nothing of its own.
class OpCount {
 public:
  explicit OpCount(bool by_name = false) {
    state().operators = 0;
    state().nodes = 0;
    state().dispatched = 0;
    ++state().generation;
    state().by_name = by_name;
    {
      std::lock_guard<std::mutex> lock(state().mutex);
      state().names.clear();
    }
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback(&OpCount::on_start, &OpCount::on_end)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    active_ = true;
  }
  ~OpCount() { stop(); }
  OpCount(const OpCount&) = delete;
  OpCount& operator=(const OpCount&) = delete;

  /// Stops counting (idempotent); the counts stay readable.
  void stop() {
    if (!active_) return;
    at::removeCallback(handle_);
    active_ = false;
  }
  /// ATen operators run (RecordScope::FUNCTION), top-level and nested.
  int64_t operators() const { return state().operators.load(); }
  /// Operators called by no other operator (from our code, an autograd node or the engine):
  /// what the host dispatches one by one, LibTorch's internals (e.g. the CPU bmm's per-batch
  /// selects) left out.
  int64_t dispatched() const { return state().dispatched.load(); }
  /// Autograd nodes whose backward ran (RecordScope::BACKWARD_FUNCTION).
  int64_t nodes() const { return state().nodes.load(); }
  /// The `n` most frequent names (dispatched operators and nodes), most frequent first; empty
  /// unless constructed with by_name.
  std::vector<std::pair<std::string, int64_t>> top(size_t n) const {
    std::vector<std::pair<std::string, int64_t>> rows;
    {
      std::lock_guard<std::mutex> lock(state().mutex);
      rows.assign(state().names.begin(), state().names.end());
    }
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    if (rows.size() > n) rows.resize(n);
    return rows;
  }
  /// Prints top(n) to `out`, one "count name" line each.
  void print_top(std::FILE* out, size_t n) const {
    for (const auto& [name, count] : top(n)) {
      std::fprintf(out, "%8lld  %s\n", static_cast<long long>(count), name.c_str());
    }
  }

 private:
  struct State {
    std::atomic<int64_t> operators{0};
    std::atomic<int64_t> nodes{0};
    std::atomic<int64_t> dispatched{0};
    std::atomic<int64_t> generation{0};
    std::atomic<bool> by_name{false};
    std::mutex mutex;
    std::map<std::string, int64_t> names;
  };
  static State& state() {
    static State s;
    return s;
  }
  /// The calling thread's operator nesting depth, reset when a new OpCount starts (an operator
  /// still running on a thread when the last one stopped never ended for it).
  static int& depth() {
    thread_local int d = 0;
    thread_local int64_t generation = -1;
    if (generation != state().generation.load()) {
      generation = state().generation.load();
      d = 0;
    }
    return d;
  }
  /// The engine's frames ("autograd::engine::evaluate_function: X" around node X, recorded in
  /// scope FUNCTION with LibTorch 1.13): neither operators nor nodes.
  static bool is_engine_frame(const at::RecordFunction& fn) {
    static constexpr char kPrefix[] = "autograd::engine::";
    return std::strncmp(fn.name(), kPrefix, sizeof(kPrefix) - 1) == 0;
  }
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    if (is_engine_frame(fn)) return nullptr;
    bool named = false;
    if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
      ++state().nodes;
      named = true;
    } else {
      ++state().operators;
      if (depth()++ == 0) {
        ++state().dispatched;
        named = true;
      }
    }
    if (named && state().by_name.load()) {
      std::lock_guard<std::mutex> lock(state().mutex);
      ++state().names[fn.name()];
    }
    return nullptr;
  }
  static void on_end(const at::RecordFunction& fn, at::ObserverContext* /*unused*/) {
    if (fn.scope() != at::RecordScope::FUNCTION || is_engine_frame(fn)) return;
    int& d = depth();
    if (d > 0) --d;
  }

  at::CallbackHandle handle_{};
  bool active_ = false;
};

}  // namespace mtp::bench
