// mtp-harness's command line (command_line.h): every subcommand and option, validated by CLI11.
#include "harness/command_line/command_line.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include "harness/common/error.h"
#include "harness/config/enums.h"
#include "harness/record/schema.h"
#include "harness/schedule/schedule.h"

namespace mtp::cli {
namespace {

/// A real-number option that must be finite and within [lo, hi] (or (lo, hi] when `lo_open`):
/// CLI::Range lets NaN through (every comparison with NaN is false).
CLI::Validator finite_number(double lo, double hi, bool lo_open) {
  const std::string rule =
      std::isinf(hi)
          ? fmt::format("must be a finite number {} {:g}", lo_open ? ">" : ">=", lo)
          : fmt::format("must be a finite number in {}{:g}, {:g}]", lo_open ? "(" : "[", lo, hi);
  return CLI::Validator(
      [=](std::string& s) {
        double v = NAN;
        try {
          size_t used = 0;
          v = std::stod(s, &used);
          if (used != s.size()) v = NAN;
        } catch (const std::exception&) {
          v = NAN;
        }
        const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
        return ok ? std::string() : rule;
      },
      "NUMBER", "finite-number");
}

/// --record and --dump-steps, shared by check, run and equiv.
void add_record_flags(CLI::App* app, TrainingFlags& flags) {
  app->add_option("--record", flags.record,
                  "what records keep of grads and weights: full | digest (XXH3-128 digests "
                  "per tensor and per 64 Ki-element block) | auto (full while a step's tensors "
                  "are at most 64 MiB; default: the scenario's, else auto)")
      ->check(CLI::IsMember(config::enum_names<config::RecordMode>()));
  app->add_option("--dump-steps", flags.dump_steps,
                  "steps kept in full whatever the record mode: all | A | A-B | A- | A,B,...")
      ->check(CLI::Validator(
          [](std::string& v) { return v.empty() ? std::string("must not be empty") : ""; }, "STEPS",
          "non-empty"));
}

/// "mtp-harness check" for the deepest subcommand that was parsed (or "mtp-harness").
std::string command_path(const CLI::App& app) {
  std::string path = "mtp-harness";
  const CLI::App* at = &app;
  while (true) {
    const std::vector<const CLI::App*> parsed =
        at->get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
    if (parsed.empty()) return path;
    at = parsed.front();
    path += " " + at->get_name();
  }
}

}  // namespace

std::optional<int> parse_command_line(int argc, char** argv, CommandLine& cl) {
  CheckOptions& check = cl.check;
  RunCommandOptions& run = cl.run;
  CompareOptions& cmp = cl.compare;
  ReplayOptions& rep = cl.replay;
  std::string& info_path = cl.info_path;
  bool& info_json = cl.info_json;
  GoldenOptions& gold = cl.golden;
  EquivOptions& eq = cl.equiv;
  LayoutOptions& lay = cl.layout;
  ScheduleOptions& sch = cl.schedule;
  DataPrepareOptions& prep = cl.data_prepare;
  PerfCompareCommandOptions& pc = cl.perf_compare;
  PerfAbOptions& pab = cl.perf_ab;
  PerfMergeOptions& pm = cl.perf_merge;
  OracleOptions& orc = cl.oracle;
  SelftestOptions& st = cl.selftest;
  // Paths must not be empty ("" would silently mean a default or the current directory).
  const CLI::Validator non_empty(
      [](std::string& s) { return s.empty() ? std::string("must not be empty") : std::string(); },
      "PATH", "non-empty");
  // A byte size (16G, 512M) is not negative: AsSizeValue alone wraps "-5G" to 2^64 − 5·2^30.
  const CLI::Validator byte_size(
      [](std::string& s) {
        const size_t i = s.find_first_not_of(" \t");
        if (i != std::string::npos && (s[i] == '-' || s[i] == '+')) {
          return std::string("a size has no sign (e.g. 16G, 512M, 1000000)");
        }
        return CLI::AsSizeValue(false)(s);
      },
      "SIZE", "byte size");
  CLI::App app{
      "mtp-harness: bitwise-determinism harness for pipeline-parallel training with "
      "Multi-Token Prediction (MTP standalone vs MTP with the loss)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mtp-harness 0.1");

  auto* c = app.add_subcommand("check",
                               "run every variant of a scenario and check its expectations "
                               "(exit 0: all hold, 1: one fails, 2: bad input, 3: failure)");
  c->add_option("scenario", check.scenario,
                "scenario TOML file (default: the embedded default scenario)")
      ->check(non_empty);
  c->add_option("--out", check.out_dir, "directory for the records (default: runs/<scenario>)")
      ->check(non_empty);
  c->add_option("--json", check.json_path, "JSON report path (default: <out>/report.json)")
      ->check(non_empty);
  c->add_option("--junit", check.junit_path, "also write JUnit XML here")->check(non_empty);
  c->add_option("--variant", check.only_variants, "run only these variants (repeatable)");
  c->add_flag("-v,--verbose", check.verbose, "print each variant's chunk map");
  c->add_flag("--allow-skipped", check.allow_skipped,
              "exit 0 even when --variant leaves no expectation evaluated (otherwise: exit 1, "
              "nothing was proven)");
  c->add_option("--html", check.html_path,
                "HTML report path (default: beside the JSON report, report.html)")
      ->check(non_empty);
  c->add_flag("-q,--quiet", check.quiet, "no progress line on stderr");
  c->add_option("--keep-last", check.keep_last,
                "keep only the N newest run directories of runs/<scenario>/ (this one among "
                "them; a default check grows runs/ by ~130 MB)")
      ->check(CLI::Range(1, 1000000));
  add_record_flags(c, check.training);
  c->add_option("--device", check.device, "cpu | cuda (default: the scenario's [training].device)")
      ->check(CLI::IsMember(config::enum_names<config::Device>()));
  c->add_option("--init-from", check.training.init_from,
                "every variant's initial weights from this record step, REC.h5[:STEP] (default "
                "step 0; overrides [training].init_from)");
  c->add_flag("--save-optimizer-state", check.training.save_optimizer_state,
              "record every step's optimizer state (resumable with run --resume)");
  c->add_flag("--record-copies", check.training.record_copies,
              "record every parameter copy (group copies: replicas, embedding copies)");
  c->add_option("--max-memory", check.max_memory,
                "refuse a variant whose estimated memory exceeds this (e.g. 16G; default: what "
                "the device has)")
      ->transform(byte_size);

  auto* r = app.add_subcommand("run",
                               "run one variant and write its record; with --launcher, as "
                               "one pipeline rank of a torchrun/mpirun launch (NCCL)");
  r->add_option("scenario", run.scenario,
                "scenario TOML file (default: the embedded default scenario)")
      ->check(non_empty);
  r->add_option("--variant", run.variant, "variant name")->required();
  r->add_option("--out", run.out, "record path (default: runs/<scenario>/<variant>.h5)")
      ->check(non_empty);
  r->add_option("--device", run.device, "cpu | cuda (default: the scenario's)")
      ->check(CLI::IsMember(config::enum_names<config::Device>()));
  r->add_option("--launcher", run.launcher,
                "env (torchrun: RANK, WORLD_SIZE, LOCAL_RANK, "
                "MASTER_ADDR, MASTER_PORT) | mpi (mpirun) | threads "
                "(one process, one thread per GPU)")
      ->check(CLI::IsMember({"env", "mpi", "threads"}));
  r->add_flag("--world-size", run.print_world_size,
              "print the variant's number of ranks (DP x CP x P: the processes or GPUs a "
              "--launcher run needs) and exit without running");
  r->add_option("--port", run.port, "TCPStore port for --launcher threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  r->add_option("--timeout", run.timeout_s, "receive timeout in seconds")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  r->add_option("--init-from", run.training.init_from,
                "initial weights from this record step, REC.h5[:STEP] (default step 0; overrides "
                "[training].init_from)");
  r->add_option("--resume", run.training.resume,
                "continue the run from step STEP of REC.h5 (its weights and optimizer state, "
                "recorded with --save-optimizer-state): REC.h5:STEP");
  r->add_flag("--save-optimizer-state", run.training.save_optimizer_state,
              "record every step's optimizer state (resumable with --resume)");
  r->add_flag("--record-copies", run.training.record_copies,
              "record every parameter copy (group copies) instead of stopping at one that "
              "drifted");
  add_record_flags(r, run.training);
  r->add_option("--max-memory", run.max_memory,
                "refuse when the estimated memory exceeds this (e.g. 16G; default: what the "
                "device has)")
      ->transform(byte_size);

  auto* k = app.add_subcommand("compare",
                               "compare two step records (exit 0: equal under the class, "
                               "1: different, 2: bad input)");
  k->add_option("a", cmp.a, "first record (.h5)")->required()->check(non_empty);
  k->add_option("b", cmp.b, "second record (.h5)")->required()->check(non_empty);
  k->add_option("--class", cmp.cls, "bitwise | ulp:N | tol:RTOL,ATOL | rel_l2:B | differ")
      ->capture_default_str();
  k->add_option("--records", cmp.records,
                fmt::format("records to compare: {}", fmt::join(record::record_groups(), ", ")))
      ->delimiter(',')
      ->capture_default_str();
  k->add_option("--include", cmp.include, "glob on tensor names (repeatable)")
      ->capture_default_str();
  k->add_option("--exclude", cmp.exclude, "glob on tensor names (repeatable)");
  k->add_option("--steps", cmp.steps, "all | A | A-B | A- | A,B,...")->capture_default_str();
  k->add_option("--max-rows", cmp.max_rows, "differing tensors to list")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  k->add_option("--json", cmp.json_path, "also write the result as JSON")->check(non_empty);
  k->add_option("--html", cmp.html_path,
                "also write the comparison as a self-contained HTML page (check's report: both "
                "runs' losses, the verdict, the heatmap of a failing comparison)")
      ->check(non_empty);
  k->add_flag("--localize", cmp.localize,
              "when digest-only records differ, re-train both variants (from the scenario text "
              "the records embed) with the divergent step in full and report the element");
  k->add_flag("--allow-nonfinite", cmp.allow_nonfinite,
              "compare records holding NaN or inf as any others (default: such a record fails, "
              "naming its first non-finite value)");
  k->add_flag("--ignore-digests", cmp.ignore_digests,
              "compare values even where the digests are equal (checks records edited after "
              "they were written)");

  auto* rp = app.add_subcommand("replay",
                                "re-run a record's steps with this build (its "
                                "hyperparameters, weights and batches) and compare "
                                "(exit 0: equal under the class, 1: different, 2: bad "
                                "input)");
  rp->add_option("record", rep.record, "record (.h5)")->required()->check(non_empty);
  rp->add_option("--class", rep.cls,
                 "bitwise | ulp:N | tol:RTOL,ATOL | rel_l2:B (default: bitwise when the "
                 "environment fingerprint matches the record's, else the "
                 "dtype's rounding tolerance)");
  rp->add_option("--steps", rep.steps, "consecutive steps: all | A | A-B | A-")
      ->capture_default_str();
  rp->add_option("--variant-like", rep.variant_like,
                 "run with this scenario variant's "
                 "implementation, layout, schedule, DP, CP, EP and "
                 "optimizer")
      ->check(non_empty);
  rp->add_option("--scenario", rep.scenario,
                 "scenario of --variant-like (default: the embedded "
                 "default scenario)")
      ->check(non_empty);
  rp->add_option("--out", rep.out, "keep the new record here (default: a temporary file)")
      ->check(non_empty);
  rp->add_option("--json", rep.json_path, "also write the result as JSON")->check(non_empty);
  rp->add_option("--device", rep.device, "cpu | cuda (default: the record's)")
      ->check(CLI::IsMember(config::enum_names<config::Device>()));
  rp->add_option("--max-rows", rep.max_rows, "differing tensors to list")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));

  auto* inf = app.add_subcommand("info",
                                 "print a record's attributes, steps and per-step "
                                 "losses");
  inf->add_option("record", info_path, "record (.h5)")->required()->check(non_empty);
  inf->add_flag("--json", info_json,
                "print it as JSON (attributes, losses, steps, the first "
                "non-finite value) instead");

  auto* orx = app.add_subcommand(
      "oracle",
      "check a record's step against the straight-line float64 program (exit 0: every loss "
      "and main grad within the bound, 1: not, or the record holds only digests, 2: bad input)");
  orx->add_option("record", orc.record, "record (.h5)")->required()->check(non_empty);
  orx->add_option("--step", orc.step,
                  "the step checked (its losses and main grads, from the weights of the step "
                  "before)")
      ->capture_default_str()
      ->check(CLI::Range(1, 999999));
  orx->add_option("--bound", orc.bound,
                  "relative L2 bound per tensor (default: the one derived from the record's "
                  "dtype, printed)")
      ->check(finite_number(0.0, INFINITY, /*lo_open=*/true));
  orx->add_option("--json", orc.json_path, "also write the result as JSON")->check(non_empty);
  orx->add_option("--max-rows", orc.max_rows, "tensors to list, worst first")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));

  auto* stx = app.add_subcommand(
      "selftest",
      "plant each known bug (scenarios/faults.toml, compiled in) and show which expectation "
      "catches it, at which step and tensor (exit 0: every fault caught where expected, 1: one "
      "is not, 2: bad input)");
  stx->add_option("--out", st.out_dir, "directory for the records and reports")->check(non_empty);
  stx->add_option("--json", st.json_path, "also write the detection table as JSON")
      ->check(non_empty);
  stx->add_option("--device", st.device, "cpu | cuda (all ranks as threads on GPU 0)")
      ->check(CLI::IsMember(config::enum_names<config::Device>()));
  stx->add_flag("-q,--quiet", st.quiet, "no progress line on stderr");

  SimulateOptions& sim = cl.simulate;
  auto* smx = app.add_subcommand(
      "simulate",
      "play every pipeline rank's op order with measured node costs and link delays: step time, "
      "bubble, imbalance, peak activations, an SVG timeline (harness/sim)");
  smx->add_option("--preset", sim.preset, "the model: dsv3 | small | tiny")->check(non_empty);
  smx->add_option("--scenario", sim.scenario, "the model of this scenario's [model]")
      ->check(non_empty);
  smx->add_option("--layout", sim.layouts, "Megatron layout string; repeat to compare layouts")
      ->required()
      ->expected(1, -1);
  smx->add_option("--pp", sim.pipeline_size, "P")->required()->check(CLI::Range(1, 4096));
  smx->add_option("--microbatches", sim.num_microbatches, "M")
      ->required()
      ->check(CLI::Range(1, 100000));
  smx->add_option("--schedule", sim.schedule,
                  "1f1b | interleaved | combined_1f1b | none (default: from P and V)")
      ->check(non_empty);
  smx->add_option("--group", sim.group_size, "N, interleaved microbatch group size (default P)")
      ->check(CLI::Range(1, 100000));
  smx->add_option("--costs", sim.costs, "node costs, from mtp-harness calibrate")
      ->required()
      ->check(non_empty);
  smx->add_option("--link", sim.link, "nvlink | ib (default: the costs file's link)")
      ->check(CLI::IsMember({"nvlink", "ib"}));
  smx->add_option("--cp", sim.context_parallel_size,
                  "context-parallel size: node times / CP, K/V all-gathers and reduce-scatters "
                  "added (seq_length a multiple of 2 · cp)")
      ->check(CLI::Range(1, 4096));
  smx->add_option("--ep", sim.expert_parallel_size,
                  "expert-parallel size: dispatch and combine all-to-alls per MoE layer "
                  "(num_moe_experts a multiple of ep); combined 1F1B hides them")
      ->check(CLI::Range(1, 4096));
  smx->add_option("--collective-link", sim.collective_link,
                  "nvlink | ib: the link CP and EP collectives cross (default: --link's)")
      ->check(CLI::IsMember({"nvlink", "ib"}));
  smx->add_option("--mtp", sim.mtp_num_layers, "MTP depths D (default: the model's)")
      ->check(CLI::Range(0, 64));
  smx->add_flag("--split", sim.split,
                "layouts as candidate/split/ reads them (MTP depths over stages)");
  smx->add_option("--html", sim.html_path, "write the tables and timelines as HTML")
      ->check(non_empty);
  smx->add_option("--json", sim.json_path, "also write the result as JSON")->check(non_empty);

  CalibrateOptions& cal = cl.calibrate;
  auto* cbx = app.add_subcommand(
      "calibrate",
      "time every node kind of a model's layers on this device (forward and backward, harness "
      "kernels, bf16 on CUDA) and write the costs for simulate");
  cbx->add_option("--preset", cal.preset, "the model: dsv3 | small | tiny")->capture_default_str();
  auto* cal_out = cbx->add_option("--out", cal.out, "the costs JSON to write")->check(non_empty);
  cbx->add_option("--device", cal.device, "cpu | cuda")
      ->capture_default_str()
      ->check(CLI::IsMember(config::enum_names<config::Device>()));
  cbx->add_option("--experts-per-rank", cal.experts_per_rank,
                  "routed experts of the timed MoE layer (expert parallelism's share)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cbx->add_option("--repeats", cal.repeats, "timed repetitions (the median is kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cbx->add_option("--warmup", cal.warmup, "untimed repetitions first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cbx->add_option("--link", cal.link, "the link written into the costs: nvlink | ib")
      ->capture_default_str()
      ->check(CLI::IsMember({"nvlink", "ib"}));
  auto* cal_pp = cbx->add_option("--pp", cal.validate_pipeline_size, "P of the --validate runs")
                     ->check(CLI::Range(1, 64));
  auto* cal_validate =
      cbx->add_option("--validate", cal.validate,
                      "a layout to run with --pp ranks as threads on this device, every op "
                      "timed: each rank's op sum against the simulated busy time (repeatable)")
          ->check(non_empty)
          ->needs(cal_pp);
  cal_pp->needs(cal_validate);
  cbx->add_option("--microbatches", cal.validate_microbatches, "M of the --validate runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096))
      ->needs(cal_validate);
  cbx->add_option("--tolerance", cal.tolerance,
                  "largest relative difference --validate accepts (exit 1 beyond it)")
      ->capture_default_str()
      ->check(finite_number(0.0, 10.0, /*lo_open=*/false))
      ->needs(cal_validate);
  cbx->add_flag("--cuda-graphs", cal.validate_cuda_graphs,
                "time the costs (dense models with MTP: from graphed pipelined stages) and the "
                "--validate runs with each chunk's forward and backward replayed as CUDA graphs: "
                "the device's time without the host's (CUDA)");
  auto* cal_costs = cbx->add_option("--costs", cal.costs,
                                    "validate this costs file instead of calibrating (no --out)")
                        ->check(non_empty)
                        ->needs(cal_validate)
                        ->excludes(cal_out);
  cbx->add_flag("--from-stages", cal.from_stages,
                "time the costs from the ops of two pipelined runs with ranks as threads, each "
                "stage one node kind (dense models with MTP), as --validate times its ops; "
                "implied by --cuda-graphs")
      ->excludes(cal_costs);
  cbx->callback([cal_out, cal_costs] {
    if (cal_out->count() == 0 && cal_costs->count() == 0) {
      throw CLI::RequiredError("--out (or --costs with --validate)");
    }
  });

  auto* g = app.add_subcommand("golden",
                               "committed per-tensor digests of every CPU scenario "
                               "(golden/digests/)");
  g->require_subcommand(1);
  auto* gc = g->add_subcommand("check",
                               "train each scenario (digest records) and compare every "
                               "tensor of every step with its goldens (exit 0: equal, "
                               "1: a tensor differs, 2: bad input or an environment "
                               "that can change bits)");
  auto* gu = g->add_subcommand("update", "re-make the goldens and print what changed");
  for (auto* sub : {gc, gu}) {
    sub->add_option("scenarios", gold.scenarios,
                    "scenario files (default: every scenarios/*.toml that trains on the CPU)")
        ->check(non_empty);
    sub->add_option("--golden-dir", gold.golden_dir, "where the goldens are")
        ->capture_default_str()
        ->check(non_empty);
    sub->add_option("--records", gold.records,
                    "take the records of this check run directory instead of training (one "
                    "scenario)")
        ->check(non_empty);
    sub->add_flag("-q,--quiet", gold.quiet, "no progress line on stderr");
    sub->add_flag("--detail", gold.detail,
                  "list every changed tensor with its digests (default: a summary by variant, "
                  "step and group)");
  }
  gu->add_flag("--dry-run", gold.dry_run, "print what would change; write nothing");
  gu->add_flag("--accept-scenario-change", gold.accept_scenario_change,
               "re-make goldens whose scenario text changed since they were made");
  gc->add_flag("--allow-fingerprint-mismatch", gold.allow_fingerprint_mismatch,
               "compare even when the goldens were made where BLAS, LibTorch, the compiler, libc "
               "or the pinned CPU kernels differ");

  auto* e = app.add_subcommand("equiv",
                               "is layout A equivalent to layout B? train both on a "
                               "built-in model and compare bitwise (exit 0: EQUAL, 1: "
                               "the first divergence, 2: bad input)");
  e->add_option("layout_a", eq.layout_a, "Megatron layout string, e.g. \"E|t*3|(t|)*5mmL\"")
      ->required();
  e->add_option("layout_b", eq.layout_b, "the other layout, e.g. \"E|t*3|(t|)*4tmm|L\"")
      ->required();
  e->add_option("--pp", eq.pipeline_size, "pipeline-parallel size P (of both, unless --pp-b)")
      ->required()
      ->check(CLI::Range(1, 64));
  e->add_option("--pp-b", eq.pipeline_size_b, "P of layout B (e.g. P = 1 against P = 4)")
      ->check(CLI::Range(1, 64));
  e->add_option("--impl", eq.impls,
                "implementations of A and B, e.g. reference,candidate "
                "(default: reference for a co-located layout, candidate for "
                "a standalone one)");
  e->add_option("--steps", eq.steps, "optimizer steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  e->add_option("--model", eq.model,
                "built-in model: default (8 layers, D = 2) | tiny-moe (MoE, "
                "D = 1)")
      ->capture_default_str();
  e->add_option("--dp", eq.data_parallel_size, "data-parallel size of both")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  e->add_option("--cp", eq.context_parallel_size,
                "context-parallel size of both (each rank holds s/cp positions of every "
                "sequence; seq_length a multiple of 2·cp)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  e->add_option("--ep", eq.expert_parallel_size,
                "expert-parallel size of both (each MoE layer's experts split over ep of the "
                "dp · cp ranks; an MoE model, ep dividing dp · cp and the expert count)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  e->add_option("--schedule", eq.schedule,
                "none | 1f1b | interleaved | combined_1f1b (default: "
                "from P and V)");
  e->add_option("--dtype", eq.dtype, "float32 | float64 | bfloat16 (default: the model's)")
      ->check(CLI::IsMember(config::enum_names<config::DType>()));
  e->add_option("--device", eq.device, "cpu | cuda")
      ->check(CLI::IsMember(config::enum_names<config::Device>()));
  e->add_option("--keep", eq.keep,
                "keep the records and the generated scenario in this "
                "directory")
      ->check(non_empty);
  e->add_option("--json", eq.json_path, "also write the result as JSON")->check(non_empty);
  e->add_flag("-q,--quiet", eq.quiet, "no progress line on stderr");

  auto* l =
      app.add_subcommand("layout", "validate a pipeline layout string and print its rank map");
  l->add_option("layout", lay.layout, "Megatron layout string, e.g. \"E|t*3|(t|)*4tm|L\"")
      ->required();
  l->add_option("--pp", lay.pipeline_size, "pipeline-parallel size P")
      ->required()
      ->check(CLI::Range(1, 4096));
  l->add_option("--layers", lay.num_layers, "decoder layers N (default: the number of t)")
      ->check(CLI::Range(0, 1000000));
  l->add_option("--mtp", lay.mtp_num_layers, "MTP depths D (default: the number of m)")
      ->check(CLI::Range(0, 1000000));
  l->add_flag("--split", lay.split,
              "validate for the split implementation: MTP depths may spread over consecutive "
              "stages (R7 relaxed), e.g. 'Et*2|t*2m|m|m|L' --pp 5");

  auto* s = app.add_subcommand("schedule", "print every pipeline rank's forward/backward order");
  s->add_option("--pp", sch.pipeline_size, "P")->required()->check(CLI::Range(1, 4096));
  s->add_option("--vpp", sch.virtual_size, "V")->capture_default_str()->check(CLI::Range(1, 4096));
  s->add_option("--microbatches", sch.num_microbatches, "M")
      ->required()
      ->check(CLI::Range(1, 100000));
  s->add_option("--group", sch.group_size, "N, interleaved microbatch group size (default P)")
      ->check(CLI::Range(0, 100000));
  s->add_option("--kind", sch.kind, schedule::schedule_kind_names() + " (default: from P and V)");

  auto* d = app.add_subcommand("data", "data set tools");
  d->require_subcommand(1);
  auto* dp = d->add_subcommand("prepare",
                               "write a byte-level Megatron indexed dataset "
                               "(OUT_PREFIX.idx, OUT_PREFIX.bin; EOD 0 after each "
                               "document) from text files");
  dp->add_option("args", prep.args, "TEXT... OUT_PREFIX")
      ->required()
      ->expected(2, -1)
      ->check(non_empty);
  dp->add_option("--split", prep.split,
                 "file (one document per file) | blank-lines (one per "
                 "blank-line-separated block)")
      ->capture_default_str()
      ->check(CLI::IsMember({"file", "blank-lines"}));

  auto* pf = app.add_subcommand("perf", "perf baselines (Google Benchmark JSON)");
  pf->require_subcommand(1);
  auto* pfc = pf->add_subcommand("compare",
                                 "compare a contender's benchmark results with a "
                                 "baseline's (exit 0: no regression, 1: a "
                                 "significant regression beyond the threshold or a "
                                 "failed run, 2: bad input)");
  pfc->add_option("baseline", pc.baseline, "baseline JSON, e.g. golden/perf/h200.json")
      ->required()
      ->check(non_empty);
  pfc->add_option("contender", pc.contender,
                  "contender JSON (same benchmarks, with "
                  "--benchmark_repetitions)")
      ->required()
      ->check(non_empty);
  pfc->add_option("--threshold", pc.threshold,
                  "a regression slows the median real time by more "
                  "than this fraction")
      ->capture_default_str();
  pfc->add_option("--alpha", pc.alpha,
                  "significance level of the two-sided Mann-Whitney U "
                  "test")
      ->capture_default_str();
  pfc->add_option("--json", pc.json_path, "also write the comparison as JSON")->check(non_empty);
  pfc->add_flag("--allow-fingerprint-mismatch", pc.allow_fingerprint_mismatch,
                "compare results measured on another GPU or driver (context keys gpu, driver)");
  auto* pfa = pf->add_subcommand("ab",
                                 "run two builds' benchmark programs interleaved on this "
                                 "machine and compare them (exit 0: no regression of B, "
                                 "1: a regression, 2: bad input, 3: a run failed). "
                                 "Example: perf ab base/build/train_step_benchmark "
                                 "build/train_step_benchmark --filter 'BM_TrainStep.*'");
  pfa->add_option("bin_a", pab.bin_a, "the baseline build's benchmark program")
      ->required()
      ->check(non_empty);
  pfa->add_option("bin_b", pab.bin_b, "the contender build's benchmark program")
      ->required()
      ->check(non_empty);
  pfa->add_option("--filter", pab.filter, "--benchmark_filter for both programs (default: all)");
  pfa->add_option("--rounds", pab.rounds,
                  "runs of each program, alternating (>= 5 to reach "
                  "p < 0.05)")
      ->capture_default_str();
  pfa->add_option("--timeout", pab.timeout_s,
                  "seconds one run may take before it is killed "
                  "(exit 3)")
      ->capture_default_str();
  pfa->add_option("--threshold", pab.threshold,
                  "a regression slows the median by more than "
                  "this fraction")
      ->capture_default_str();
  pfa->add_option("--alpha", pab.alpha, "significance level of the U test")->capture_default_str();
  pfa->add_option("--json", pab.json_path, "also write the comparison as JSON")->check(non_empty);
  auto* pfm = pf->add_subcommand("merge",
                                 "merge Google Benchmark JSON files measured on one "
                                 "machine into one file (one baseline for several "
                                 "benchmark programs)");
  pfm->add_option("inputs", pm.inputs, "JSON files")->required()->expected(1, -1)->check(non_empty);
  pfm->add_option("--out", pm.out, "the merged file")->required()->check(non_empty);

  // Every subcommand's help ends with examples and its exit codes.
  const std::pair<CLI::App*, const char*> footers[] = {
      {c,
       "Examples:\n  mtp-harness check                         the embedded default scenario\n"
       "  mtp-harness check scenarios/overlap.toml --junit junit.xml --keep-last 5\n"
       "Exit: 0 every expectation holds, 1 one fails (or cannot be decided), 2 bad input, "
       "3 failure"},
      {r,
       "Examples:\n  mtp-harness run scenarios/default.toml --variant ref_p1 --out p1.h5\n"
       "  mtp-harness run --variant ref_p4v2 --resume p.h5:2   (p.h5 made with "
       "--save-optimizer-state)\nExit: 0 the record is written, 2 bad input, 3 failure"},
      {k,
       "Examples:\n  mtp-harness compare a.h5 b.h5\n"
       "  mtp-harness compare a.h5 b.h5 --class ulp:4 --records grad --steps 1\n"
       "Exit: 0 equal under the class, 1 different, 2 bad input, 3 failure"},
      {rp,
       "Examples:\n  mtp-harness replay runs/default/latest/cand_p4v2_tmm.h5\n"
       "  mtp-harness replay golden/oracle/megatron_selftest_fused.h5 --variant-like ref_p1\n"
       "Exit: 0 equal under the class, 1 different, 2 bad input, 3 failure"},
      {stx,
       "Examples:\n  mtp-harness selftest\n  mtp-harness selftest --out st --json "
       "st/detection.json\n"
       "Exit: 0 every fault caught by its detector, 1 one is not (or a clean expectation fails), "
       "2 bad input, 3 failure"},
      {smx,
       "Examples:\n  mtp-harness simulate --preset dsv3 --costs golden/perf/costs_h200_dsv3.json "
       "--pp 16 --microbatches 64 --layout 'Et|(tt|)*30mL' --layout 'Et|(tt|)*29tt|m|L'\n"
       "  mtp-harness simulate --preset dsv3 --costs golden/perf/costs_h200_dsv3.json --pp 16 "
       "--microbatches 64 --ep 8 --collective-link ib --schedule combined_1f1b --layout "
       "'Et|(tt|)*30mL'\n"
       "Exit: 0 simulated, 2 bad input (a layout rule, a schedule rule, a costs file)"},
      {cbx,
       "Examples:\n  mtp-harness calibrate --out golden/perf/costs_h200_dsv3.json\n"
       "  mtp-harness calibrate --preset tiny --device cpu --out costs_cpu.json\n"
       "  mtp-harness calibrate --preset small --out costs.json --pp 4 \\\n"
       "      --validate 'E|t*3|(t|)*5mL' --validate 'E|t*3|(t|)*4tm|L'\n"
       "Exit: 0 written (and every --validate rank within --tolerance), 1 a --validate rank "
       "beyond it, 2 bad input, 3 failure"},
      {orx,
       "Examples:\n  mtp-harness oracle runs/default/latest/cand_p4v2_tmm.h5\n"
       "  mtp-harness oracle r.h5 --step 2 --bound 1e-4 --json oracle.json\nExit: 0 within the "
       "bound, 1 outside it or undecided (digest-only tensors), 2 bad input, 3 failure"},
      {inf,
       "Examples:\n  mtp-harness info runs/default/latest/ref_p1.h5\n"
       "  mtp-harness info r.h5 --json\nExit: 0 printed, 2 not a readable record, "
       "3 failure"},
      {gc,
       "Examples:\n  mtp-harness golden check\n"
       "  mtp-harness golden check scenarios/default.toml --records runs/default/latest\n"
       "Exit: 0 every tensor equals its golden, 1 one differs, 2 bad input or an "
       "environment that can change bits, 3 failure"},
      {gu,
       "Examples:\n  mtp-harness golden update scenarios/default.toml --dry-run\n"
       "  mtp-harness golden update scenarios/bf16.toml --accept-scenario-change\n"
       "Exit: 0 written (or unchanged), 2 bad input or a refused scenario change, "
       "3 failure"},
      {e,
       "Examples:\n  mtp-harness equiv 'E|t*3|(t|)*5mmL' 'E|t*3|(t|)*4tmm|L' --pp 4\n"
       "  mtp-harness equiv 'Et*8mmL' 'E|t*3|(t|)*5mmL' --pp 1 --pp-b 4\n"
       "Exit: 0 EQUAL (bitwise), 1 the first divergence, 2 bad input, 3 failure"},
      {l,
       "Examples:\n  mtp-harness layout 'E|t*3|(t|)*4tm|L' --pp 4\n"
       "  mtp-harness layout 'E|t*3|(t|)*5mmL' --pp 4   (V = 2 model chunks per rank)\n"
       "Exit: 0 valid (the rank map is printed), 2 a rule is broken (it is named)"},
      {s,
       "Examples:\n  mtp-harness schedule --pp 4 --vpp 2 --microbatches 8\n"
       "  mtp-harness schedule --pp 2 --microbatches 4 --kind combined_1f1b\n"
       "Exit: 0 printed, 2 bad input"},
      {dp,
       "Examples:\n  mtp-harness data prepare /usr/share/common-licenses/GPL-3 gpl3\n"
       "  mtp-harness data prepare a.txt b.txt corpus --split blank-lines\n"
       "Exit: 0 written, 2 bad input (a 0 byte in the text, a missing file), 3 failure"},
      {pfc,
       "Examples:\n  mtp-harness perf compare golden/perf/h200.json new.json\n"
       "  mtp-harness perf compare base.json new.json --threshold 0.1 --json cmp.json\n"
       "Exit: 0 no regression, 1 a regression or a failed run, 2 bad input, 3 failure"},
      {pfa,
       "Examples:\n  mtp-harness perf ab base/build/train_step_benchmark "
       "build/train_step_benchmark --filter 'BM_TrainStep.*'\n"
       "Exit: 0 no regression of B, 1 a regression, 2 bad input, 3 a run failed"},
      {pfm,
       "Examples:\n  mtp-harness perf merge kernels.json train_step.json --out h200.json\n"
       "Exit: 0 written, 2 bad input (another machine's file, a benchmark in two files), "
       "3 failure"},
  };
  for (const auto& [sub, text] : footers) sub->footer(text);
  app.name("mtp-harness");
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::cerr << fmt::format(
          "mtp-harness: error: unknown subcommand '{}' (subcommands: {}; see "
          "mtp-harness --help)\n",
          argv[1], fmt::join(names, ", "));
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "mtp-harness: error: " << e.what() << " (see " << command_path(app)
              << " --help)\n";
    return kExitUsage;
  }
  const std::pair<const CLI::App*, Command> chosen[] = {
      {c, Command::kCheck},         {r, Command::kRun},          {k, Command::kCompare},
      {rp, Command::kReplay},       {inf, Command::kInfo},       {gc, Command::kGoldenCheck},
      {gu, Command::kGoldenUpdate}, {e, Command::kEquiv},        {l, Command::kLayout},
      {s, Command::kSchedule},      {dp, Command::kDataPrepare}, {pfc, Command::kPerfCompare},
      {pfa, Command::kPerfAb},      {pfm, Command::kPerfMerge},  {orx, Command::kOracle},
      {stx, Command::kSelftest},    {smx, Command::kSimulate},   {cbx, Command::kCalibrate}};
  for (const auto& [sub, command] : chosen) {
    if (sub->parsed()) {
      cl.command = command;
      cl.golden.update = command == Command::kGoldenUpdate;
      return std::nullopt;
    }
  }
  std::cerr << "mtp-harness: error: no subcommand (see mtp-harness --help)\n";
  return kExitUsage;
}

}  // namespace mtp::cli
