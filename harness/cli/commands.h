// File: harness/cli/commands.h
//
// The mtp-harness subcommands. Each returns the process exit code (harness/common/error.h) and
// throws InputError / InfraError / RecordError for main() to report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/command_line/options.h"
#include "harness/config/enums.h"
#include "harness/config/run_config.h"
#include "harness/engine/chunk.h"
#include "harness/engine/plan.h"
#include "harness/engine/resource_estimate.h"

namespace mtp::cli {

/// The implementation of `kind` (reference/ or candidate/).
std::unique_ptr<engine::Implementation> make_implementation(config::Implementation kind);

/// Applies `flags` over the scenario's [training] and variants: --init-from replaces init_from,
/// --resume sets resume_from and drops init_from (the resumed step's weights are the start),
/// --save-optimizer-state turns it on, --record replaces the record mode of the training and of
/// every variant, --dump-steps adds steps kept in full. Throws InputError naming the flag and
/// the rule (a value parse_record_ref rejects; --init-from with --resume; an unknown mode; a
/// step outside [0, steps]).
void apply_training_flags(const TrainingFlags& flags, config::TrainingConfig& training,
                          std::vector<config::VariantSpec>& variants);
/// The flags of `flags` that were given, as they would be typed (" --record digest …"), for the
/// commands that re-train a variant.
std::string training_flags_text(const TrainingFlags& flags);

/// Refuses, before anything is allocated, a variant whose estimated memory
/// (engine::estimate_resources) exceeds `max_memory` bytes (--max-memory; 0 = what the device
/// has: CPU MemAvailable and cgroup room, or cudaMemGetInfo's free bytes of `device_index`), or
/// whose record exceeds what is left of `disk_budget` (free bytes of the output directory;
/// decreased by the record's estimate, so several variants are checked together).
/// `all_ranks_here`: every rank of the variant runs in this process. `where` starts the error.
/// Throws InputError (exit 2) with the estimate. Returns the estimate.
engine::ResourceEstimate require_variant_resources(const engine::RunPlan& plan,
                                                   const engine::Implementation& impl,
                                                   uint64_t max_memory, bool all_ranks_here,
                                                   int device_index, uint64_t& disk_budget,
                                                   const std::string& where);
/// Free bytes of the file system holding `dir` (its nearest existing ancestor); 0 when unknown.
uint64_t free_disk_bytes(const std::string& dir);

/// Runs every variant of the scenario, evaluates every expectation, prints the verdict table and
/// writes the JSON (and JUnit) report. 0 = all hold, 1 = one fails.
int run_check(const CheckOptions& opt);

/// Runs one variant and writes its record. With a launcher this process runs one pipeline rank
/// (RANK of WORLD_SIZE = P) over NCCL on GPU LOCAL_RANK, and rank 0 writes the record.
int run_one(const RunCommandOptions& opt);

/// Prints a record's every step's losses and its first non-finite value first, then its
/// attributes (hyperparameters, variant, environment fingerprint) and its steps; `json`: all of
/// that as one JSON object (schema_version 1).
int run_info(const std::string& path, bool json = false);

/// mtp-harness oracle: step `opt.step` of a record against the straight-line float64 program
/// (harness/oracle/oracle.h) run on the record's own weights of the step before (the bf16 model
/// weights of a bf16 run) and its batch: each loss and main grad's relative L2 error
/// ‖record − oracle‖/‖oracle‖, the worst first, and the verdict against the bound (the record
/// dtype's unless given). Exit 0 within, 1 outside or undecided (a tensor held only as a
/// digest), 2 bad input (not a record, no such step, a model replay cannot read).
int run_oracle(const OracleOptions& opt);

/// mtp-harness selftest: trains the compiled-in scenarios/faults.toml (each variant plants one
/// bug of config/fault.h), evaluates its expectations and prints the detection table: per fault
/// its source, the detector expectation, the step and tensor where it was caught, and the time.
/// A fault of config::all_faults() without a detector is a gap and fails. Returns kExitOk when
/// every expectation holds, kExitMismatch otherwise. Throws what check throws.
int run_selftest(const SelftestOptions& opt);

/// simulate: the pipeline cost simulator over each --layout of the model (--preset or
/// --scenario's [model]) with the node costs of --costs (harness/sim); prints per layout the
/// step time, bubble, rank imbalance, peak activations, the ratio to the first layout and the
/// most loaded stage, then every pipeline rank's busy, idle and work time; --html adds an SVG
/// timeline per layout, --json everything. Throws InputError (a layout or schedule rule, a costs
/// file, no or two model sources). Returns kExitOk.
int run_simulate(const SimulateOptions& opt);

/// calibrate: times every node kind of the preset's layers on --device (see calibrate_command.cc
/// for the method) and writes the costs JSON (harness/sim/costs.h); with --validate, then checks
/// those costs (or --costs) against a measured run (cli/calibrate_validate.h). Throws InputError
/// for a bad preset, output, costs file or layout, InfraError when the device fails. Returns
/// kExitOk, or kExitMismatch when a --validate rank is beyond --tolerance.
int run_calibrate(const CalibrateOptions& opt);

/// Compares two records. 0 = equal under the class, 1 = different.
int run_compare(const CompareOptions& opt);

/// Re-runs `steps` of a record with this build — its hyperparameters, the weights (and optimizer
/// state) of the step before, its batches — and compares the new record with it. 0 = equal under
/// the class, 1 = different.
int run_replay(const ReplayOptions& opt);

/// golden check: trains each scenario's variants with digest records (or reads --records) and
/// compares every tensor's digest with golden_dir/<scenario>.txt; 0 = all equal, 1 = a tensor
/// differs (named: scenario, variant, step, tensor). Refuses (InputError, exit 2) goldens made
/// in an environment whose bit-relevant fingerprint differs unless allow_fingerprint_mismatch.
/// Both print first whether the scenario text (as a line diff) or the environment changed, then
/// the changed tensors summed up by variant × step × group with the changed losses' values, and
/// every changed tensor with --detail. With --records DIR and no scenario file, the scenario is
/// the one the records were made from.
/// golden update: rewrites the goldens and prints what changed (never silently); --dry-run
/// writes nothing; a changed scenario text needs --accept-scenario-change.
int run_golden(const GoldenOptions& opt);

/// equiv: trains two layouts of a built-in model and compares them bitwise (batch, loss, every
/// grad and weight, every step). 0 = EQUAL, 1 = the first divergence (step, tensor, element,
/// bits, owning stage), 2 = bad input.
int run_equiv(const EquivOptions& opt);

/// Prints the rank map of a layout (or throws LayoutError). 0 on success.
int run_layout(const LayoutOptions& opt);

/// Writes OUT_PREFIX.idx / .bin, a byte-level Megatron indexed dataset of the text files, and
/// prints what it wrote. 0 on success.
int run_data_prepare(const DataPrepareOptions& opt);

/// Prints every rank's op order. 0 on success.
int run_schedule(const ScheduleOptions& opt);

/// Compares a contender's benchmark JSON with a baseline's (harness/perf/perf_compare.h) and
/// prints the table. 0 = no regression, 1 = a regression or a failed contender run. Throws
/// InputError (exit 2) for unreadable or malformed files, bad options, or files whose GPU
/// fingerprints (context keys gpu, driver) differ unless allow_fingerprint_mismatch.
int run_perf_compare(const PerfCompareCommandOptions& opt);

/// Runs two Google Benchmark programs interleaved (one repetition per run, `rounds` runs each,
/// A and B alternating with the order swapped every round) and compares them as perf compare
/// does: 0 = no regression of B against A, 1 = a regression. InputError (exit 2) for a program
/// that is not an executable file or bad options; InfraError (exit 3) when a run fails, runs past
/// timeout_s (it is killed) or writes no usable JSON (its last output is shown).
int run_perf_ab(const PerfAbOptions& opt);

/// Writes one Google Benchmark JSON file holding every input's benchmarks
/// (perf::merge_benchmark_json). 0 on success; InputError for bad input.
int run_perf_merge(const PerfMergeOptions& opt);

}  // namespace mtp::cli
