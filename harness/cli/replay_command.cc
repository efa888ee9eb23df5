// mtp-harness replay: re-runs steps of a record with this build — the record's hyperparameters
// (replay/record_run.h), its weights (and optimizer state) of the step before, its batches
// (engine/recorded_batches.h) — and compares the new record with it (README.md "replay").
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/common/output_file.h"
#include "harness/common/temp_file.h"
#include "harness/common/utf8.h"
#include "harness/compare/compare.h"
#include "harness/engine/determinism.h"
#include "harness/engine/plan.h"
#include "harness/engine/recorded_batches.h"
#include "harness/engine/trainer.h"
#include "harness/gpu/gpu.h"
#include "harness/replay/record_run.h"
#include "harness/scenario/scenario.h"
#include "scenarios/embedded.h"

namespace mtp::cli {
namespace fs = std::filesystem;
namespace {

/// The tolerance a replay uses when the environment differs from the record's: rounding-level
/// differences of the training dtype (float32: the measured GPU-vs-CPU difference of the default
/// scenario's records, max |diff| 5.6e-6, fits tol:1e-3,1e-5; README.md "GPU").
compare::CompareClass environment_tolerance(config::DType dtype) {
  return compare::CompareClass::parse(dtype == config::DType::kFloat64 ? "tol:1e-9,1e-11"
                                                                       : "tol:1e-3,1e-5");
}

/// The steps --steps names: consecutive, each with a batch in the record.
replay::ReplaySteps replay_steps(const record::RecordReader& rec, const std::string& spec) {
  std::vector<int> batched;
  for (int s : rec.steps()) {
    if (s >= 1 && rec.has_group(s, record::Group::kBatch)) batched.push_back(s);
  }
  if (batched.empty()) {
    throw record::RecordError(fmt::format("{}: has no step with a batch to replay", rec.path()));
  }
  std::set<int> want;
  try {
    want = scenario::parse_step_spec(spec, batched.back());
  } catch (const InputError& e) {
    throw InputError(fmt::format("--steps: {}", e.what()));
  }
  if (want.empty()) want.insert(batched.begin(), batched.end());
  replay::ReplaySteps r{*want.begin(), *want.rbegin()};
  for (int s = r.first; s <= r.last; ++s) {
    if (!want.count(s)) {
      throw InputError(
          fmt::format("--steps {}: a replay runs consecutive steps ({} is missing "
                      "between {} and {})",
                      spec, s, r.first, r.last));
    }
    if (!std::binary_search(batched.begin(), batched.end(), s)) {
      throw InputError(
          fmt::format("--steps {}: {} has no batch at step {} (steps with a batch: "
                      "{})",
                      spec, rec.path(), s, fmt::join(batched, " ")));
    }
  }
  return r;
}

/// The groups the record holds at any replayed step, canonical order.
std::vector<std::string> recorded_groups(const record::RecordReader& rec,
                                         const replay::ReplaySteps& steps) {
  std::vector<std::string> out;
  for (const auto& g : record::record_groups()) {
    for (int s = steps.first; s <= steps.last; ++s) {
      const auto have = rec.groups(s);
      if (std::find(have.begin(), have.end(), g) != have.end()) {
        out.push_back(g);
        break;
      }
    }
  }
  return out;
}

/// What differs between the two records' environment fingerprints (device, the attributes
/// determinism_fingerprint() writes and, on CUDA, gpu_fingerprint()'s): "key: A vs B" for each
/// key in both, then one "not in the record: k, …" for the keys the replayed record lacks.
std::vector<std::string> fingerprint_differences(const record::AttrMap& old_attrs,
                                                 const record::AttrMap& new_attrs,
                                                 const engine::RunPlan& plan, int device_index) {
  std::vector<std::string> keys{"device"};
  for (const auto& [k, v] : engine::determinism_fingerprint()) keys.push_back(k);
  if (plan.training.device == config::Device::kCuda) {
    for (const auto& [k, v] : gpu::gpu_fingerprint(device_index)) keys.push_back(k);
  }
  // One line, at most 60 characters.
  auto text = [](const record::AttrValue& value) {
    std::string t = std::visit([](const auto& x) { return fmt::format("{}", x); }, value);
    std::replace(t.begin(), t.end(), '\n', ' ');
    return "\"" + (t.size() > 60 ? t.substr(0, 57) + "..." : t) + "\"";
  };
  std::vector<std::string> out, absent;
  for (const auto& k : keys) {
    const auto a = old_attrs.find(k), b = new_attrs.find(k);
    if (a == old_attrs.end()) {
      absent.push_back(k);
    } else if (b == new_attrs.end() || a->second != b->second) {
      out.push_back(fmt::format("{}: {} vs {}", k, text(a->second),
                                b == new_attrs.end() ? "(absent)" : text(b->second)));
    }
  }
  if (!absent.empty()) out.push_back(fmt::format("not in the record: {}", fmt::join(absent, ", ")));
  return out;
}

}  // namespace

int run_replay(const ReplayOptions& opt) {
  const record::RecordReader rec(opt.record);
  const replay::ReplaySteps steps = replay_steps(rec, opt.steps);
  std::vector<std::string> groups = recorded_groups(rec, steps);
  auto recorded = [&groups](record::Group g) {
    return std::find(groups.begin(), groups.end(), record::group_name(g)) != groups.end();
  };
  const bool optimizer_matters = steps.last > steps.first || recorded(record::Group::kWeight) ||
                                 recorded(record::Group::kOptimizer);
  replay::RecordRun run = replay::read_record_run(rec, steps, optimizer_matters);
  if (!opt.scenario.empty() && opt.variant_like.empty()) {
    throw InputError(
        fmt::format("--scenario {}: names the scenario of --variant-like, which is "
                    "not given",
                    opt.scenario));
  }
  if (!opt.variant_like.empty()) {
    const scenario::Scenario sc = opt.scenario.empty()
                                      ? scenario::parse_scenario(scenarios::default_scenario_text(),
                                                                 "<embedded default scenario>")
                                      : scenario::load_scenario(opt.scenario);
    replay::apply_variant_like(run, sc.variant(opt.variant_like));
  }
  if (!opt.device.empty()) {
    run.training.device = config::parse_enum<config::Device>(opt.device, "--device");
  }
  const int start = steps.first - 1;
  (start == 0 ? run.training.init_from : run.training.resume_from) =
      config::RecordRef{opt.record, start};
  run.training.save_optimizer_state = recorded(record::Group::kOptimizer);
  run.training.record_copies = recorded(record::Group::kCopies);
  const auto impl = make_implementation(run.variant.implementation);
  engine::RunPlan plan;
  try {
    plan = engine::plan_variant(run.model, run.training, run.variant, *impl);
  } catch (const InputError& e) {
    throw InputError(fmt::format("replay of {}: {}", opt.record, e.what()));
  }
  engine::RunOptions ro;
  ro.scenario_name = "replay";
  ro.batches = std::make_shared<engine::RecordedBatches>(
      rec, steps.first, steps.last, run.global_microbatches, run.model.micro_batch_size,
      run.model.seq_length, run.model.vocab_size);
  // Losses are stored as the record stores them (Megatron-LM's record: float64), so they compare.
  if (recorded(record::Group::kLoss)) {
    const std::vector<std::string> names = rec.names(steps.first, record::Group::kLoss);
    const record::DType d = names.empty()
                                ? record::DType::kF32
                                : rec.describe(steps.first, record::Group::kLoss, names[0]).dtype;
    if (d == record::DType::kF64 && plan.training.dtype != config::DType::kFloat64) {
      ro.loss_dtype = config::DType::kFloat64;
      run.notes.push_back("losses stored in float64, as the record stores them");
    }
  }
  std::error_code ec;
  if (!opt.out.empty() && fs::exists(opt.out, ec) && fs::equivalent(opt.out, opt.record, ec)) {
    throw InputError(fmt::format("--out {}: is the record being replayed", opt.out));
  }
  // --class and the outputs are checked before anything runs.
  const compare::CompareClass given_class =
      opt.cls.empty() ? compare::CompareClass{} : compare::CompareClass::parse(opt.cls);
  FileRoles files;
  files.input("the record", opt.record);
  if (!opt.scenario.empty()) files.input("--scenario", opt.scenario);
  files.output("--out", opt.out);
  files.output("--json", opt.json_path);
  if (!opt.json_path.empty()) {
    require_utf8("record", opt.record, "the JSON result holds it");
    if (!opt.out.empty()) require_utf8("--out", opt.out, "the JSON result holds it");
  }
  std::unique_ptr<TempDirectory> tmp;
  if (opt.out.empty()) tmp = std::make_unique<TempDirectory>("mtp-harness-replay");
  ro.record_path = opt.out.empty() ? tmp->path() + "/replay.h5" : opt.out;

  std::cout << fmt::format("# mtp-harness replay {}: steps {}-{} from the weights{} of step {}\n",
                           opt.record, steps.first, steps.last,
                           start > 0 ? " and optimizer state" : "", start);
  for (const auto& n : run.notes) std::cout << "# derived: " << n << "\n";
  const engine::RunResult rr = engine::run_variant(plan, *impl, data::DataConfig{}, ro);
  std::cout << fmt::format(
      "# ran {} {} (P {}, V {}, DP {}{}, M {}, {}, {}) in {} on {}: {:.2f} s\n", impl->name(),
      plan.layout.text, plan.pipeline_size(), plan.layout.virtual_size, plan.data_parallel_size(),
      plan.extra_parallel_sizes(), plan.num_microbatches,
      schedule::schedule_kind_name(plan.schedule.kind), config::enum_name(plan.variant.optimizer),
      config::enum_name(plan.training.dtype), config::enum_name(plan.training.device),
      rr.wall_seconds);

  const record::RecordReader replayed(ro.record_path);
  const std::vector<std::string> env =
      fingerprint_differences(rec.attrs(), replayed.attrs(), plan, ro.device_index);
  compare::CompareClass cls = given_class;
  std::string why;
  if (!opt.cls.empty()) {
    why = "--class";
  } else if (env.empty()) {
    why = "the environment fingerprint matches the record's";
  } else {
    cls = environment_tolerance(plan.training.dtype);
    why = fmt::format("the environment differs from the record's: {}", fmt::join(env, "; "));
  }
  std::cout << fmt::format("# class {}: {}\n", cls.to_string(), why);
  compare::Selection sel;
  sel.groups = groups;
  for (int s = steps.first; s <= steps.last; ++s) sel.steps.insert(s);
  const compare::CompareResult r = compare::compare_records(rec, replayed, cls, sel);
  std::cout << compare::format_report(
      r, opt.record, opt.out.empty() ? "(replay, not kept: --out)" : opt.out, opt.max_rows);
  if (!opt.json_path.empty()) {
    nlohmann::json j{
        {"record", opt.record},
        {"replay", opt.out},
        {"steps", {steps.first, steps.last}},
        {"groups", groups},
        {"derived", run.notes},
        {"class", cls.to_string()},
        {"class_reason", why},
        {"environment_differences", env},
        {"equal", r.equal},
        {"holds", r.holds()},
        {"tensors_compared", r.tensors_compared},
        {"structural", r.structural},
        {"first_divergence", r.first_divergence ? r.first_divergence->describe() : ""}};
    write_file_atomically(opt.json_path, j.dump(2) + "\n");
  }
  return r.holds() ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
