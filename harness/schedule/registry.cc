// File: harness/schedule/registry.cc
//
// The table of schedules: one row per schedule file. Adding a schedule is its file, its
// ScheduleKind value and a row here.
#include <fmt/format.h>

#include "harness/schedule/schedule.h"

namespace mtp::schedule {

const ScheduleDef& no_pipelining_schedule();  // no_pipelining.cc
const ScheduleDef& one_f_one_b_schedule();    // one_f_one_b.cc
const ScheduleDef& interleaved_schedule();    // interleaved.cc
const ScheduleDef& combined_1f1b_schedule();  // combined_1f1b.cc

const std::vector<const ScheduleDef*>& schedules() {
  static const std::vector<const ScheduleDef*> rows = [] {
    std::vector<const ScheduleDef*> r{&no_pipelining_schedule(), &one_f_one_b_schedule(),
                                      &interleaved_schedule(), &combined_1f1b_schedule()};
    for (size_t i = 0; i < r.size(); ++i) {
      MTP_INTERNAL_ASSERT(
          static_cast<size_t>(r[i]->kind) == i,
          fmt::format("schedule row {} ({}) is out of ScheduleKind order", i, r[i]->name));
    }
    return r;
  }();
  return rows;
}

const ScheduleDef& schedule_def(ScheduleKind kind) {
  const auto& rows = schedules();
  const size_t i = static_cast<size_t>(kind);
  MTP_INTERNAL_ASSERT(i < rows.size(), fmt::format("no schedule row for kind {}", i));
  return *rows[i];
}

ScheduleKind default_schedule_kind(int pipeline_size, int virtual_size) {
  for (const ScheduleDef* d : schedules()) {
    if (d->is_default_for(pipeline_size, virtual_size)) return d->kind;
  }
  throw InternalError(
      fmt::format("no default schedule for P={} V={}", pipeline_size, virtual_size));
}

}  // namespace mtp::schedule
