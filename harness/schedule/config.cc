// File: harness/schedule/config.cc
//
// Schedule names (from the rows of registry.cc) and the rules every schedule shares; each
// schedule's own rules are its row's check (spec §4.1, §4.5; Megatron-LM schedules.py:1160-1180).
#include "harness/schedule/schedule.h"

#include <fmt/format.h>

namespace mtp::schedule {

const std::vector<ScheduleKind>& all_schedule_kinds() {
  static const std::vector<ScheduleKind> kinds = [] {
    std::vector<ScheduleKind> k;
    for (const ScheduleDef* d : schedules()) k.push_back(d->kind);
    return k;
  }();
  return kinds;
}

std::string schedule_kind_names(const std::string& separator) {
  std::string out;
  for (ScheduleKind k : all_schedule_kinds()) {
    out += (out.empty() ? "" : separator) + schedule_kind_name(k);
  }
  return out;
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind k : all_schedule_kinds()) {
    if (schedule_kind_name(k) == name) return k;
  }
  throw ScheduleError(fmt::format("unknown schedule kind \"{}\": expected one of \"{}\"", name,
                                  schedule_kind_names("\", \"")));
}

std::string schedule_kind_name(ScheduleKind kind) { return schedule_def(kind).name; }

void validate(const ScheduleConfig& config) {
  const std::string kind = schedule_kind_name(config.kind);
  const int p = config.pipeline_size;
  const int v = config.virtual_size;
  const int m = config.num_microbatches;
  if (p < 1) {
    throw ScheduleError(fmt::format("{} schedule: pipeline size P={} must be >= 1", kind, p));
  }
  if (v < 1) {
    throw ScheduleError(
        fmt::format("{} schedule: virtual pipeline size V={} must be >= 1", kind, v));
  }
  if (m < 1) {
    throw ScheduleError(
        fmt::format("{} schedule: number of microbatches M={} must be >= 1", kind, m));
  }
  if (config.microbatch_group_size != 0 && !schedule_def(config.kind).takes_group_size) {
    throw ScheduleError(fmt::format(
        "{} schedule: a microbatch group size (N={}) applies to the interleaved and combined "
        "1F1B schedules only",
        kind, config.microbatch_group_size));
  }
  schedule_def(config.kind).check(config);
}

}  // namespace mtp::schedule
