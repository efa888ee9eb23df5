// File: harness/engine/trainer.h
//
// Trains one variant of a scenario for `steps` optimizer steps and writes its HDF5 step record
// (architecture.md §3 data flow, §6 schema).
#pragma once

#include <string>
#include <vector>

#include "harness/data/token_source.h"
#include "harness/engine/chunk.h"
#include "harness/engine/run_config.h"
#include "harness/model/config.h"
#include "harness/schedule/schedule.h"

namespace mtp::engine {

/// Summary of a finished run.
struct RunResult {
  std::string record_path;
  double wall_seconds = 0.0;
  std::vector<double> total_loss;  ///< per step
  std::vector<std::string> chunk_map;  ///< "stage i (p, v): describe()" per stage
};

/// Builds the layout and chunks of `variant`, runs cfg.steps steps (schedule → finalize grads
/// over the embedding group in ascending stage order → optional clip with a canonical-order
/// norm → Adam), and writes the record to options.record_path atomically.
/// Throws InputError for a bad variant (layout, schedule, implementation mismatch),
/// InfraError for transport timeouts and I/O, InternalError for harness bugs.
RunResult run_variant(const model::ModelConfig& model, const TrainingConfig& training,
                      const data::DataConfig& data, const VariantSpec& variant,
                      const Implementation& impl, const RunOptions& options);

/// The layout a variant runs: its layout string for P (or the default split when empty).
layout::PipelineLayout variant_layout(const VariantSpec& variant, const model::ModelConfig& model);

/// The schedule a variant runs (explicit, or derived from P and V).
schedule::ScheduleConfig variant_schedule(const VariantSpec& variant,
                                          const layout::PipelineLayout& layout,
                                          int64_t num_microbatches);

}  // namespace mtp::engine
