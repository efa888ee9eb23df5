// File: harness/command_line/options.h
//
// The options of every mtp-harness subcommand, as parse_command_line (command_line.h) fills them
// from argv and the subcommands (harness/cli/commands.h) take them. Torch-free: the launcher
// parses with them before LibTorch is loaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/record/schema.h"

namespace mtp::cli {

/// Where training starts and what it saves, from the command line (check and run).
struct TrainingFlags {
  std::string init_from;              ///< --init-from REC.h5[:STEP]; "" = the scenario's
  std::string resume;                 ///< --resume REC.h5:STEP (run only); "" = none
  bool save_optimizer_state = false;  ///< --save-optimizer-state
  bool record_copies = false;         ///< --record-copies
  std::string record;                 ///< --record full|digest|auto; "" = the scenario's
  std::string dump_steps;             ///< --dump-steps all|A|A-B|A-|A,B; "" = the scenario's
};

struct CheckOptions {
  std::string scenario;    ///< path; "" = the embedded default scenario
  std::string out_dir;     ///< "" = runs/<scenario name>
  std::string json_path;   ///< "" = <out_dir>/report.json
  std::string junit_path;  ///< "" = none
  std::vector<std::string>
      only_variants;           ///< run just these (expectations needing others are skipped)
  bool allow_skipped = false;  ///< exit 0 even when --variant leaves no expectation evaluated
  std::string html_path;       ///< "" = beside the JSON report (report.html)
  bool quiet = false;          ///< no progress line on stderr
  /// --keep-last N: after this check's run directory is made under runs/<scenario>/, remove the
  /// oldest there until N remain (0: keep all). Not with --out.
  int keep_last = 0;
  bool verbose = false;
  std::string device;  ///< "" = the scenario's [training].device
  TrainingFlags training;
  uint64_t max_memory = 0;  ///< --max-memory bytes; 0 = what the device has
};

struct RunCommandOptions {
  std::string scenario;  ///< path; "" = the embedded default scenario
  std::string variant;
  std::string out;     ///< record path; "" = runs/<scenario>/<variant>.h5
  std::string device;  ///< "" = the scenario's
  /// "" = every rank in this process (in-process transport); "env" (torchrun) | "mpi" (mpirun):
  /// this process is one rank; "threads": one thread per rank, rank r on GPU r, NCCL.
  std::string launcher;
  int port = 29555;         ///< TCPStore port of --launcher threads
  uint64_t max_memory = 0;  ///< --max-memory bytes; 0 = what the device has
  int timeout_s = 300;      ///< receive timeout
  /// --world-size: print the variant's number of ranks (DP × CP × P) and run nothing (launch
  /// scripts size torchrun's --nproc_per_node with it)
  bool print_world_size = false;
  TrainingFlags training;
};

struct CompareOptions {
  std::string a, b;
  std::string cls = "bitwise";
  std::vector<std::string> records = record::default_compared_groups();
  std::vector<std::string> include{"*"};
  std::vector<std::string> exclude;
  std::string steps = "all";
  int max_rows = 20;
  std::string json_path;
  std::string html_path;        ///< "" = no HTML page (cli/compare_html.h)
  bool localize = false;        ///< digest-only difference: re-train both with that step in full
  bool ignore_digests = false;  ///< read and compare values even where the digests are equal
  /// Compare records that hold a non-finite value (record::first_nonfinite); otherwise such a
  /// record fails the comparison, naming the value.
  bool allow_nonfinite = false;
};

struct ReplayOptions {
  std::string record;         ///< REC.h5
  std::string cls;            ///< "" = bitwise when the environment fingerprint matches, else
                              ///< the dtype's rounding tolerance (printed)
  std::string steps = "all";  ///< consecutive steps with a batch: all | A | A-B | A-
  std::string variant_like;   ///< "" = the record's implementation, layout and schedule
  std::string scenario;       ///< scenario of --variant-like; "" = the embedded default
  std::string out;            ///< keep the new record here; "" = a temporary file, removed
  std::string json_path;
  std::string device;  ///< "" = the record's (cpu when it names neither cpu nor cuda)
  int max_rows = 20;
};

/// mtp-harness oracle: a record's step against the straight-line float64 program
/// (harness/oracle/oracle.h).
struct OracleOptions {
  std::string record;  ///< REC.h5
  int step = 1;        ///< the step checked: its losses and main grads, from step − 1's weights
  double bound = 0.0;  ///< relative L2 bound; 0 = the record dtype's (printed)
  std::string json_path;  ///< also write the result as JSON
  int max_rows = 10;      ///< tensors listed, worst first
};

/// mtp-harness selftest: the planted bugs of scenarios/faults.toml (compiled in), each of which
/// a named expectation must catch (harness/config/fault.h).
struct SelftestOptions {
  std::string out_dir;    ///< records and reports; empty = runs/faults/<UTC time>
  std::string json_path;  ///< also write the detection table as JSON
  std::string device;     ///< "cpu" | "cuda"; empty = the scenario's (cpu)
  bool quiet = false;     ///< no progress line on stderr
};

/// mtp-harness simulate: the pipeline cost simulator (harness/sim) on one or more layouts.
struct SimulateOptions {
  std::string preset;                ///< --preset dsv3 (the model); or
  std::string scenario;              ///< --scenario S.toml: its [model]
  std::vector<std::string> layouts;  ///< --layout, one or more (ratios against the first)
  int pipeline_size = 1;             ///< --pp P
  int num_microbatches = 0;          ///< --microbatches M
  std::string schedule;              ///< --schedule KIND; "" = derived from P and V
  int group_size = 0;                ///< --group N (interleaved); 0 = P
  std::string costs;                 ///< --costs F.json (calibrate's output)
  std::string link;                  ///< --link nvlink|ib; "" = the costs file's
  int context_parallel_size = 1;     ///< --cp N (sim/simulate.h Parallelism)
  int expert_parallel_size = 1;      ///< --ep N
  std::string collective_link;       ///< --collective-link nvlink|ib; "" = the pipeline link
  int mtp_num_layers = -1;           ///< --mtp D; −1 = the model's
  bool split = false;                ///< --split: R7 as candidate/split/ reads it
  std::string html_path;             ///< --html F: tables and one SVG timeline per layout
  std::string json_path;             ///< --json F
};

/// mtp-harness calibrate: times every node kind of a model on this device (harness/sim/costs.h).
struct CalibrateOptions {
  std::string preset = "dsv3";  ///< --preset
  std::string out;              ///< --out F.json (required)
  std::string device = "cuda";  ///< --device cpu | cuda
  int experts_per_rank = 8;     ///< --experts-per-rank: routed experts timed (EP's share)
  int repeats = 5;              ///< --repeats: timed repetitions (median)
  int warmup = 2;               ///< --warmup: untimed repetitions first
  std::string link = "nvlink";  ///< --link: the link written into the costs
  /// --validate LAYOUT (repeatable): after calibrating (or with --costs: instead), run the
  /// preset's model on LAYOUT with P = --pp ranks as threads, time every op and set each rank's
  /// op sum beside the simulated busy time (cli/calibrate_validate.h).
  std::vector<std::string> validate;
  int validate_pipeline_size = 0;  ///< --pp P (with --validate)
  int validate_microbatches = 8;   ///< --microbatches M (with --validate)
  double tolerance = 0.10;         ///< --tolerance: relative bound of the validation
  std::string costs;               ///< --costs F.json: validate these costs, calibrate nothing
  /// --cuda-graphs (CUDA): the costs are timed from graphed pipelined stages (dense models with
  /// MTP, cli/calibrate_stages.h) and the validation runs replay every chunk's forward and
  /// backward as CUDA graphs (engine/chunk_graphs.h), so an op's time is the device's work
  /// without the host's issue time. With --costs: the validation runs only.
  bool validate_cuda_graphs = false;
  /// --from-stages: the costs are read off the ops of two pipelined runs with ranks as threads,
  /// each stage one node kind (dense models with MTP, cli/calibrate_stages.h), timed as a
  /// --validate run times its ops, instead of per-node bursts on one thread. Implied by
  /// --cuda-graphs.
  bool from_stages = false;
};

struct GoldenOptions {
  std::vector<std::string> scenarios;  ///< scenario files; empty = every CPU scenario
  std::string golden_dir = "golden/digests";
  std::string records;  ///< a check's run directory to take the records from
  bool allow_fingerprint_mismatch = false;
  bool update = false;  ///< golden update (else golden check)
  bool quiet = false;
  bool detail = false;   ///< list every changed tensor, not only the summary
  bool dry_run = false;  ///< update: print what would change, write nothing
  /// update: re-make goldens whose scenario text changed (refused otherwise: a golden made from
  /// another scenario text is another test, not an update).
  bool accept_scenario_change = false;
};

struct EquivOptions {
  std::string layout_a, layout_b;  ///< Megatron layout strings
  int pipeline_size = 1;           ///< --pp (layout A, and B unless --pp-b)
  int pipeline_size_b = 0;         ///< --pp-b; 0 = --pp
  std::string impls;  ///< "reference,candidate"; "" = by layout (co-located: reference)
  int steps = 3;
  std::string model = "default";  ///< scenarios::builtin_model_names()
  int data_parallel_size = 1;
  int context_parallel_size = 1;  ///< --cp
  int expert_parallel_size = 1;   ///< --ep
  std::string schedule;           ///< "" = derived
  std::string dtype;              ///< "" = the model's scenario
  std::string device;             ///< "" = cpu
  std::string keep;               ///< keep the records (and the generated scenario) here
  std::string json_path;
  bool quiet = false;
};

struct LayoutOptions {
  std::string layout;
  int pipeline_size = 1;
  int num_layers = -1;      ///< −1: the number of `t` in the layout
  int mtp_num_layers = -1;  ///< −1: the number of `m` in the layout
  bool split = false;       ///< R7 as candidate/split/ reads it (layout::MtpRule::kSplit)
};

struct DataPrepareOptions {
  std::vector<std::string> args;  ///< TEXT... OUT_PREFIX
  std::string split = "file";     ///< "file" | "blank-lines" (data/prepare.h DocumentSplit)
};

struct ScheduleOptions {
  std::string kind;  ///< "" = derived from P and V
  int pipeline_size = 2, virtual_size = 1, num_microbatches = 4, group_size = 0;
};

struct PerfCompareCommandOptions {
  std::string baseline;     ///< Google Benchmark JSON (with --benchmark_repetitions)
  std::string contender;    ///< the same, from the run under test
  double threshold = 0.05;  ///< fraction the median must be slower by (perf::PerfCompareOptions)
  double alpha = 0.05;      ///< significance level of the U test
  std::string json_path;    ///< "" = no JSON
  bool allow_fingerprint_mismatch = false;  ///< compare results of different GPUs / drivers
};

struct PerfAbOptions {
  std::string bin_a, bin_b;  ///< two builds' Google Benchmark programs
  std::string filter;        ///< --benchmark_filter ("" = every benchmark)
  int rounds = 5;            ///< runs of each program, alternating
  int timeout_s = 900;       ///< a run longer than this is killed (InfraError)
  double threshold = 0.05;
  double alpha = 0.05;
  std::string json_path;
};

struct PerfMergeOptions {
  std::vector<std::string> inputs;  ///< Google Benchmark JSON files, measured on one machine
  std::string out;                  ///< the merged file
};

}  // namespace mtp::cli
