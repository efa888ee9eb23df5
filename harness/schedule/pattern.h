// File: harness/schedule/pattern.h
//
// The pieces the schedules share (schedules.py's helpers): the microbatch group size, the
// chunk-major forward table, the 1F1B pattern, and the interleaved rules. Internal to
// harness/schedule. Torch-free.
#pragma once

#include <vector>

#include "harness/schedule/schedule.h"

namespace mtp::schedule::detail {

/// N: microbatch_group_size, or P when it is 0 (Megatron's default).
int group_size(const ScheduleConfig& config);

/// Forward-step table in chunk-major groups of `n` microbatches (the last group is the
/// remainder). Megatron-LM schedules.py:989-1016.
std::vector<TableEntry> make_table(int num_microbatches, int num_chunks, int n);

/// The 1F1B pattern of the interleaved and non-interleaved schedules: `warmup` forwards, then
/// (F(k+warmup), B(k)) pairs, then the remaining backwards. Forward step k runs table[k];
/// backward step k runs chunk V−1−table[k].chunk on that chunk's oldest stored microbatch.
std::vector<Op> one_f_one_b(const std::vector<TableEntry>& table, int num_chunks, int warmup);

/// The interleaved rules (schedules.py:1160-1180): P > 1, P ≤ N ≤ M, M mod N = 0 or ≥ P.
void check_interleaved(const ScheduleConfig& config);

/// Interleaved 1F1B's warm-up count: min(2(P−r−1) + (V−1)·N, M·V) (schedules.py:952-979).
int interleaved_warmup(const ScheduleConfig& config, int rank);

}  // namespace mtp::schedule::detail
