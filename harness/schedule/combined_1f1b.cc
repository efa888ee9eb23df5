// File: harness/schedule/combined_1f1b.cc
//
// Combined 1F1B ("EP A2A overlap", spec §4.6; Megatron-LM combined_1f1b.py and schedules.py with
// overlap_moe_expert_parallel_comm): the interleaved table with one more warm-up forward,
// W_r = min(2(P−r−1) + (V−1)·N + 1, M·V), so that each steady (F, B) pair's forward and backward
// are independent and run as one combined step, their nodes interleaved in Megatron's sub-step
// order; with P = 1: F0, (F(i+1) B(i)) for i < M−1, B(M−1). MTP with this overlap supports at
// most one depth (transformer_config.py).
#include <fmt/format.h>

#include <algorithm>

#include "harness/schedule/pattern.h"

namespace mtp::schedule {
namespace {

void check(const ScheduleConfig& c) {
  if (c.pipeline_size == 1) {
    if (c.virtual_size != 1) {
      throw ScheduleError(fmt::format(
          "combined_1f1b schedule: without pipelining (P=1) it needs V=1 (V={})", c.virtual_size));
    }
    return;
  }
  detail::check_interleaved(c);
}

}  // namespace

const ScheduleDef& combined_1f1b_schedule() {
  static const ScheduleDef def = [] {
    ScheduleDef d;
    d.kind = ScheduleKind::kCombined1F1B;
    d.name = "combined_1f1b";
    d.summary = "combined 1F1B: each steady F/B pair as one step, nodes interleaved";
    d.takes_group_size = true;
    d.overlaps_p2p = true;
    d.combined_steps = true;
    // Inside a pair of layers (Megatron model_chunk_schedule_plan.py TransformerLayerSchedulePlan
    // .run): B mtp_post, B combine, F attn, B mlp, F dispatch, B dispatch, F mlp, F combine,
    // B attn, F mtp_post.
    using N = NodeKind;
    const OpType F = OpType::kForward, B = OpType::kBackward;
    d.combined_order = {{B, N::kMtpPost},   {B, N::kCombine},  {F, N::kAttention}, {B, N::kMlp},
                        {F, N::kDispatch},  {B, N::kDispatch}, {F, N::kMlp},       {F, N::kCombine},
                        {B, N::kAttention}, {F, N::kMtpPost}};
    d.max_mtp_num_layers = 1;
    d.is_default_for = [](int, int) { return false; };
    d.check = check;
    d.warmup = [](const ScheduleConfig& c, int rank) {
      // One more warm-up forward than interleaved 1F1B makes each steady pair's F and B
      // independent (Megatron schedules.py, overlap_moe_expert_parallel_comm).
      if (c.pipeline_size == 1) return std::min(1, c.num_microbatches);
      return std::min(detail::interleaved_warmup(c, rank) + 1, c.num_microbatches * c.virtual_size);
    };
    d.ops = [](const ScheduleConfig& c, int, int warmup) {
      const int m = c.num_microbatches;
      if (c.pipeline_size == 1) return detail::one_f_one_b(detail::make_table(m, 1, m), 1, warmup);
      return detail::one_f_one_b(interleaved_table(c), c.virtual_size, warmup);
    };
    return d;
  }();
  return def;
}

}  // namespace mtp::schedule
