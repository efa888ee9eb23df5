// File: harness/schedule/one_f_one_b.cc
//
// Non-interleaved 1F1B (spec §4.4; Megatron-LM schedules.py
// forward_backward_pipelining_without_interleaving, 2147-2498): V = 1, P > 1, W_r = min(P−r−1, M)
// warm-up forwards, then 1F1B pairs, then the cool-down backwards.
#include <fmt/format.h>

#include <algorithm>

#include "harness/schedule/pattern.h"

namespace mtp::schedule {
namespace {

void check(const ScheduleConfig& c) {
  if (c.virtual_size != 1) {
    throw ScheduleError(
        fmt::format("1f1b schedule: non-interleaved 1F1B needs V=1 (V={}); use \"interleaved\"",
                    c.virtual_size));
  }
  if (c.pipeline_size < 2) {
    throw ScheduleError(fmt::format("1f1b schedule: 1F1B needs P > 1 (P={}); use \"none\" for P=1",
                                    c.pipeline_size));
  }
}

}  // namespace

const ScheduleDef& one_f_one_b_schedule() {
  static const ScheduleDef def = [] {
    ScheduleDef d;
    d.kind = ScheduleKind::kOneFOneB;
    d.name = "1f1b";
    d.summary = "non-interleaved 1F1B (V = 1)";
    d.is_default_for = [](int p, int v) { return p > 1 && v == 1; };
    d.check = check;
    d.warmup = [](const ScheduleConfig& c, int rank) {
      return std::min(c.pipeline_size - rank - 1, c.num_microbatches);
    };
    d.ops = [](const ScheduleConfig& c, int, int warmup) {
      const int m = c.num_microbatches;
      return detail::one_f_one_b(detail::make_table(m, 1, m), 1, warmup);
    };
    return d;
  }();
  return def;
}

}  // namespace mtp::schedule
