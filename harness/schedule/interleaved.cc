// File: harness/schedule/interleaved.cc
//
// Interleaved 1F1B (spec §4.5; Megatron-LM schedules.py
// forward_backward_pipelining_with_interleaving): P > 1, W_r = min(2(P−r−1) + (V−1)·N, M·V)
// warm-up forwards over the chunk-major table of groups of N microbatches, then 1F1B pairs.
#include "harness/schedule/pattern.h"

namespace mtp::schedule {

const ScheduleDef& interleaved_schedule() {
  static const ScheduleDef def = [] {
    ScheduleDef d;
    d.kind = ScheduleKind::kInterleaved;
    d.name = "interleaved";
    d.summary = "interleaved 1F1B over V model chunks per rank";
    d.takes_group_size = true;
    d.overlaps_p2p = true;
    d.is_default_for = [](int p, int v) { return p > 1 && v > 1; };
    d.check = detail::check_interleaved;
    d.warmup = detail::interleaved_warmup;
    d.ops = [](const ScheduleConfig& c, int, int warmup) {
      return detail::one_f_one_b(interleaved_table(c), c.virtual_size, warmup);
    };
    return d;
  }();
  return def;
}

}  // namespace mtp::schedule
