#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"

namespace mtp::cli {

int run_layout(const LayoutOptions& opt) {
  int n = opt.num_layers, d = opt.mtp_num_layers;
  if (n < 0 || d < 0) {
    // Count from the expanded layout so that `layout "<string>" --pp P` needs nothing else.
    auto parsed = layout::parse_layout(opt.layout);
    int t = 0, m = 0;
    for (const auto& s : parsed.stages) {
      t += static_cast<int>(std::count(s.begin(), s.end(), 't'));
      m += static_cast<int>(std::count(s.begin(), s.end(), 'm'));
    }
    if (n < 0) n = t;
    if (d < 0) d = m;
  }
  auto l = layout::build_layout(opt.layout, opt.pipeline_size, n, d,
                                opt.split ? layout::MtpRule::kSplit : layout::MtpRule::kOneStage);
  std::cout << layout::format_rank_map(l);
  return kExitOk;
}

int run_schedule(const ScheduleOptions& opt) {
  schedule::ScheduleConfig c;
  c.pipeline_size = opt.pipeline_size;
  c.virtual_size = opt.virtual_size;
  c.num_microbatches = opt.num_microbatches;
  c.microbatch_group_size = opt.group_size;
  c.kind = opt.kind.empty() ? schedule::default_schedule_kind(c.pipeline_size, c.virtual_size)
                            : schedule::parse_schedule_kind(opt.kind);
  const schedule::ScheduleDef& def = schedule::schedule_def(c.kind);
  schedule::validate(c);
  const int64_t ops = int64_t{c.pipeline_size} * c.virtual_size * c.num_microbatches;
  if (ops > 1000000) {
    throw InputError(
        fmt::format("schedule: P·V·M = {} ops per rank ×P ranks is more than this "
                    "command prints (P·V·M ≤ 1000000)",
                    ops));
  }
  std::cout << fmt::format("# schedule {} P={} V={} M={}", schedule::schedule_kind_name(c.kind),
                           c.pipeline_size, c.virtual_size, c.num_microbatches);
  if (def.takes_group_size && c.pipeline_size > 1) {
    std::cout << fmt::format(" N={}",
                             c.microbatch_group_size ? c.microbatch_group_size : c.pipeline_size);
  }
  std::cout << "\n# F<chunk>.<microbatch> = forward, B = backward, (F B) = one steady 1F1B step\n";
  for (int r = 0; r < c.pipeline_size; ++r) {
    std::cout << fmt::format("rank {} warmup {:>2}: {}\n", r, schedule::warmup_steps(c, r),
                             schedule::format_ops(schedule::rank_ops(c, r)));
  }
  return kExitOk;
}

}  // namespace mtp::cli
