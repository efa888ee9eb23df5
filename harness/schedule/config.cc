// File: harness/schedule/config.cc
//
// Schedule names and the configuration rules Megatron enforces (spec §4.1, §4.5;
// Megatron-LM schedules.py:1160-1180).
#include "harness/schedule/schedule.h"

#include <fmt/format.h>

namespace mtp::schedule {

const std::vector<ScheduleKind>& all_schedule_kinds() {
  static const std::vector<ScheduleKind> kinds{ScheduleKind::kNoPipelining, ScheduleKind::kOneFOneB,
                                               ScheduleKind::kInterleaved,
                                               ScheduleKind::kCombined1F1B};
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

std::string schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kNoPipelining:
      return "none";
    case ScheduleKind::kOneFOneB:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
    case ScheduleKind::kCombined1F1B:
      return "combined_1f1b";
  }
  throw InternalError(
      fmt::format("schedule_kind_name: bad ScheduleKind {}", static_cast<int>(kind)));
}

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
  switch (config.kind) {
    case ScheduleKind::kNoPipelining:
      if (p != 1 || v != 1) {
        throw ScheduleError(
            fmt::format("none schedule: no pipelining needs P=1 and V=1 (P={}, V={})", p, v));
      }
      return;
    case ScheduleKind::kOneFOneB:
      if (v != 1) {
        throw ScheduleError(fmt::format(
            "1f1b schedule: non-interleaved 1F1B needs V=1 (V={}); use \"interleaved\"", v));
      }
      if (p < 2) {
        throw ScheduleError(
            fmt::format("1f1b schedule: 1F1B needs P > 1 (P={}); use \"none\" for P=1", p));
      }
      return;
    case ScheduleKind::kCombined1F1B:
      if (p == 1) {
        if (v != 1) {
          throw ScheduleError(fmt::format(
              "combined_1f1b schedule: without pipelining (P=1) it needs V=1 (V={})", v));
        }
        return;
      }
      [[fallthrough]];
    case ScheduleKind::kInterleaved: {
      if (p < 2) {
        throw ScheduleError(fmt::format(
            "{} schedule: interleaved 1F1B needs P > 1 (P={}); use \"none\" for P=1", kind, p));
      }
      const int n = config.microbatch_group_size == 0 ? p : config.microbatch_group_size;
      if (n < p || n > m) {
        throw ScheduleError(
            fmt::format("{} schedule: microbatch group size N={} must satisfy P <= N <= M "
                        "(P={}, M={})",
                        kind, n, p, m));
      }
      const int remainder = m % n;
      if (remainder != 0 && remainder < p) {
        throw ScheduleError(
            fmt::format("{} schedule: the last microbatch group M mod N={} must be 0 or >= P "
                        "(M={}, N={}, P={})",
                        kind, remainder, m, n, p));
      }
      return;
    }
  }
  throw InternalError(fmt::format("validate: bad ScheduleKind {}", static_cast<int>(config.kind)));
}

}  // namespace mtp::schedule
