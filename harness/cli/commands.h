// File: harness/cli/commands.h
//
// The mtp-harness subcommands. Each returns the process exit code (harness/common/error.h) and
// throws InputError / InfraError / RecordError for main() to report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/config/enums.h"
#include "harness/config/run_config.h"
#include "harness/engine/chunk.h"
#include "harness/engine/plan.h"
#include "harness/engine/resource_estimate.h"

namespace mtp::cli {

/// The implementation of `kind` (reference/ or candidate/).
std::unique_ptr<engine::Implementation> make_implementation(config::Implementation kind);

/// Where training starts and what it saves, from the command line (check and run).
struct TrainingFlags {
  std::string init_from;              ///< --init-from REC.h5[:STEP]; "" = the scenario's
  std::string resume;                 ///< --resume REC.h5:STEP (run only); "" = none
  bool save_optimizer_state = false;  ///< --save-optimizer-state
  std::string record;                 ///< --record full|digest|auto; "" = the scenario's
  std::string dump_steps;             ///< --dump-steps all|A|A-B|A-|A,B; "" = the scenario's
};
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

struct CheckOptions {
  std::string scenario;        ///< path; "" = the embedded default scenario
  std::string out_dir;         ///< "" = runs/<scenario name>
  std::string json_path;       ///< "" = <out_dir>/report.json
  std::string junit_path;      ///< "" = none
  std::vector<std::string> only_variants;  ///< run just these (expectations needing others are skipped)
  bool allow_skipped = false;  ///< exit 0 even when --variant leaves no expectation evaluated
  std::string html_path;       ///< "" = beside the JSON report (report.html)
  bool quiet = false;          ///< no progress line on stderr
  /// --keep-last N: after this check's run directory is made under runs/<scenario>/, remove the
  /// oldest there until N remain (0: keep all). Not with --out.
  int keep_last = 0;
  bool verbose = false;
  std::string device;          ///< "" = the scenario's [training].device
  TrainingFlags training;
  uint64_t max_memory = 0;     ///< --max-memory bytes; 0 = what the device has
};
/// Runs every variant of the scenario, evaluates every expectation, prints the verdict table and
/// writes the JSON (and JUnit) report. 0 = all hold, 1 = one fails.
int run_check(const CheckOptions& opt);

struct RunCommandOptions {
  std::string scenario;        ///< path; "" = the embedded default scenario
  std::string variant;
  std::string out;             ///< record path; "" = runs/<scenario>/<variant>.h5
  std::string device;          ///< "" = the scenario's
  /// "" = every rank in this process (in-process transport); "env" (torchrun) | "mpi" (mpirun):
  /// this process is one rank; "threads": one thread per rank, rank r on GPU r, NCCL.
  std::string launcher;
  int port = 29555;            ///< TCPStore port of --launcher threads
  uint64_t max_memory = 0;     ///< --max-memory bytes; 0 = what the device has
  int timeout_s = 300;         ///< receive timeout
  TrainingFlags training;
};
/// Runs one variant and writes its record. With a launcher this process runs one pipeline rank
/// (RANK of WORLD_SIZE = P) over NCCL on GPU LOCAL_RANK, and rank 0 writes the record.
int run_one(const RunCommandOptions& opt);

struct CompareOptions {
  std::string a, b;
  std::string cls = "bitwise";
  std::vector<std::string> records{"loss", "grad", "weight"};
  std::vector<std::string> include{"*"};
  std::vector<std::string> exclude;
  std::string steps = "all";
  int max_rows = 20;
  std::string json_path;
  bool localize = false;        ///< digest-only difference: re-train both with that step in full
  bool ignore_digests = false;  ///< read and compare values even where the digests are equal
  /// Compare records that hold a non-finite value (record::first_nonfinite); otherwise such a
  /// record fails the comparison, naming the value.
  bool allow_nonfinite = false;
};
/// Prints a record's every step's losses and its first non-finite value first, then its
/// attributes (hyperparameters, variant, environment fingerprint) and its steps; `json`: all of
/// that as one JSON object (schema_version 1).
int run_info(const std::string& path, bool json = false);

/// Compares two records. 0 = equal under the class, 1 = different.
int run_compare(const CompareOptions& opt);

struct ReplayOptions {
  std::string record;          ///< REC.h5
  std::string cls;             ///< "" = bitwise when the environment fingerprint matches, else
                               ///< the dtype's rounding tolerance (printed)
  std::string steps = "all";   ///< consecutive steps with a batch: all | A | A-B | A-
  std::string variant_like;    ///< "" = the record's implementation, layout and schedule
  std::string scenario;        ///< scenario of --variant-like; "" = the embedded default
  std::string out;             ///< keep the new record here; "" = a temporary file, removed
  std::string json_path;
  std::string device;          ///< "" = the record's (cpu when it names neither cpu nor cuda)
  int max_rows = 20;
};
/// Re-runs `steps` of a record with this build — its hyperparameters, the weights (and optimizer
/// state) of the step before, its batches — and compares the new record with it. 0 = equal under
/// the class, 1 = different.
int run_replay(const ReplayOptions& opt);

struct GoldenOptions {
  std::vector<std::string> scenarios;    ///< scenario files; empty = every CPU scenario
  std::string golden_dir = "golden/digests";
  std::string records;                   ///< a check's run directory to take the records from
  bool allow_fingerprint_mismatch = false;
  bool update = false;                   ///< golden update (else golden check)
  bool quiet = false;
  bool detail = false;                   ///< list every changed tensor, not only the summary
  bool dry_run = false;                  ///< update: print what would change, write nothing
  /// update: re-make goldens whose scenario text changed (refused otherwise: a golden made from
  /// another scenario text is another test, not an update).
  bool accept_scenario_change = false;
};
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

struct EquivOptions {
  std::string layout_a, layout_b;  ///< Megatron layout strings
  int pipeline_size = 1;           ///< --pp (layout A, and B unless --pp-b)
  int pipeline_size_b = 0;         ///< --pp-b; 0 = --pp
  std::string impls;               ///< "reference,candidate"; "" = by layout (co-located: reference)
  int steps = 3;
  std::string model = "default";   ///< scenarios::builtin_model_names()
  int data_parallel_size = 1;
  std::string schedule;            ///< "" = derived
  std::string dtype;               ///< "" = the model's scenario
  std::string device;              ///< "" = cpu
  std::string keep;                ///< keep the records (and the generated scenario) here
  std::string json_path;
  bool quiet = false;
};
/// equiv: trains two layouts of a built-in model and compares them bitwise (batch, loss, every
/// grad and weight, every step). 0 = EQUAL, 1 = the first divergence (step, tensor, element,
/// bits, owning stage), 2 = bad input.
int run_equiv(const EquivOptions& opt);

struct LayoutOptions {
  std::string layout;
  int pipeline_size = 1;
  int num_layers = -1;   ///< −1: the number of `t` in the layout
  int mtp_num_layers = -1;  ///< −1: the number of `m` in the layout
};
/// Prints the rank map of a layout (or throws LayoutError). 0 on success.
int run_layout(const LayoutOptions& opt);

struct DataPrepareOptions {
  std::vector<std::string> args;  ///< TEXT... OUT_PREFIX
  std::string split = "file";     ///< "file" | "blank-lines" (data/prepare.h DocumentSplit)
};
/// Writes OUT_PREFIX.idx / .bin, a byte-level Megatron indexed dataset of the text files, and
/// prints what it wrote. 0 on success.
int run_data_prepare(const DataPrepareOptions& opt);

struct ScheduleOptions {
  std::string kind;      ///< "" = derived from P and V
  int pipeline_size = 2, virtual_size = 1, num_microbatches = 4, group_size = 0;
};
/// Prints every rank's op order. 0 on success.
int run_schedule(const ScheduleOptions& opt);

struct PerfCompareCommandOptions {
  std::string baseline;   ///< Google Benchmark JSON (with --benchmark_repetitions)
  std::string contender;  ///< the same, from the run under test
  double threshold = 0.05;  ///< fraction the median must be slower by (perf::PerfCompareOptions)
  double alpha = 0.05;      ///< significance level of the U test
  std::string json_path;    ///< "" = no JSON
  bool allow_fingerprint_mismatch = false;  ///< compare results of different GPUs / drivers
};
/// Compares a contender's benchmark JSON with a baseline's (harness/perf/perf_compare.h) and
/// prints the table. 0 = no regression, 1 = a regression or a failed contender run. Throws
/// InputError (exit 2) for unreadable or malformed files, bad options, or files whose GPU
/// fingerprints (context keys gpu, driver) differ unless allow_fingerprint_mismatch.
int run_perf_compare(const PerfCompareCommandOptions& opt);

struct PerfAbOptions {
  std::string bin_a, bin_b;  ///< two builds' Google Benchmark programs
  std::string filter;        ///< --benchmark_filter ("" = every benchmark)
  int rounds = 5;            ///< runs of each program, alternating
  int timeout_s = 900;       ///< a run longer than this is killed (InfraError)
  double threshold = 0.05;
  double alpha = 0.05;
  std::string json_path;
};
/// Runs two Google Benchmark programs interleaved (one repetition per run, `rounds` runs each,
/// A and B alternating with the order swapped every round) and compares them as perf compare
/// does: 0 = no regression of B against A, 1 = a regression. InputError (exit 2) for a program
/// that is not an executable file or bad options; InfraError (exit 3) when a run fails, runs past
/// timeout_s (it is killed) or writes no usable JSON (its last output is shown).
int run_perf_ab(const PerfAbOptions& opt);

struct PerfMergeOptions {
  std::vector<std::string> inputs;  ///< Google Benchmark JSON files, measured on one machine
  std::string out;                  ///< the merged file
};
/// Writes one Google Benchmark JSON file holding every input's benchmarks
/// (perf::merge_benchmark_json). 0 on success; InputError for bad input.
int run_perf_merge(const PerfMergeOptions& opt);

}  // namespace mtp::cli
