// File: harness/schedule/no_pipelining.cc
//
// No pipelining (spec §4.3; Megatron-LM schedules.py forward_backward_no_pipelining): P = V = 1,
// F(mb) then B(mb) for mb = 0..M−1, every op tagged kSteady so that each F(mb), B(mb) is one
// steady pair "(F0.mb B0.mb)".
#include <fmt/format.h>

#include "harness/schedule/schedule.h"

namespace mtp::schedule {
namespace {

void check(const ScheduleConfig& c) {
  if (c.pipeline_size != 1 || c.virtual_size != 1) {
    throw ScheduleError(fmt::format("none schedule: no pipelining needs P=1 and V=1 (P={}, V={})",
                                    c.pipeline_size, c.virtual_size));
  }
}

std::vector<Op> ops(const ScheduleConfig& c, int, int) {
  std::vector<Op> out;
  out.reserve(2 * static_cast<size_t>(c.num_microbatches));
  for (int mb = 0; mb < c.num_microbatches; ++mb) {
    out.push_back(Op{OpType::kForward, 0, mb, Phase::kSteady});
    out.push_back(Op{OpType::kBackward, 0, mb, Phase::kSteady});
  }
  return out;
}

}  // namespace

const ScheduleDef& no_pipelining_schedule() {
  static const ScheduleDef def = [] {
    ScheduleDef d;
    d.kind = ScheduleKind::kNoPipelining;
    d.name = "none";
    d.summary = "no pipelining (P = 1): F(mb) then B(mb)";
    d.is_default_for = [](int p, int) { return p == 1; };
    d.check = check;
    d.warmup = [](const ScheduleConfig&, int) { return 0; };
    d.ops = ops;
    return d;
  }();
  return def;
}

}  // namespace mtp::schedule
