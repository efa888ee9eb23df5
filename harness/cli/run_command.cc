#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <mutex>

#include "harness/cli/commands.h"
#include "harness/cli/scenario_runner.h"
#include "harness/common/output_file.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#include "harness/engine/trainer.h"
#include "harness/gpu/gpu.h"
#include "harness/record/record.h"
#include "harness/scenario/scenario.h"
#include "harness/transport/transport.h"
#include "scenarios/embedded.h"

namespace mtp::cli {
namespace {

/// One process, one thread per pipeline rank, rank r on GPU r, NCCL between them: each thread
/// runs the same code as a process of a torchrun launch (its own NCCL transport, rendezvous over
/// a TCPStore on 127.0.0.1), so the two launch modes must give identical records.
int run_threads_per_gpu(const scenario::Scenario& sc, const engine::RunPlan& plan,
                        const engine::Implementation& impl, engine::RunOptions ro,
                        const RunCommandOptions& opt) {
  const config::VariantSpec& v = plan.variant;
  if (sc.training.device != config::Device::kCuda) {
    throw InputError("--launcher threads needs device cuda");
  }
  const int P = plan.world_size();
  std::vector<std::unique_ptr<transport::Transport>> transports(P);
  std::vector<engine::RunResult> results(P);
  std::mutex mu;
  auto abort_all = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& t : transports) {
      if (t) t->abort(why);
    }
  };
  // engine::run_on_threads joins every rank and rethrows the first failure that is not a
  // TransportAborted, keeping its type: a bad input inside a rank still exits 2 (it exited 3).
  engine::run_on_threads(
      P,
      [&](int r) {
        const std::string where = fmt::format("variant \"{}\", rank {} (GPU {})", v.name, r, r);
        try {
          gpu::set_current_device(r);
          gpu::LaunchEnv env;
          env.rank = r;
          env.world_size = P;
          env.local_rank = r;
          env.master_addr = "127.0.0.1";
          env.master_port = opt.port;
          auto t = gpu::make_nccl_transport(env, r, ro.recv_timeout);
          {
            std::lock_guard<std::mutex> lock(mu);
            transports[r] = std::move(t);
          }
          engine::RunOptions mine = ro;
          mine.local_ranks = {r};
          mine.device_index = r;
          mine.transport = transports[r].get();
          results[r] = engine::run_variant(plan, impl, sc.data, mine);
        } catch (const transport::TransportAborted&) {
          throw;  // a consequence of another rank's failure, which is reported instead
        } catch (const InputError& e) {
          throw InputError(fmt::format("{}: {}", where, e.what()));
        } catch (const std::exception& e) {
          throw InfraError(fmt::format("{}: {}", where, e.what()));
        }
      },
      [&](int r, const std::string& why) { abort_all(fmt::format("rank {} failed: {}", r, why)); });
  const auto& rr = results[0];
  std::cout << fmt::format(
      "variant {} ({}) on {} GPUs, one thread per rank, NCCL: {} steps in {:.2f} s, "
      "final total loss {:.9g}, record {}\n",
      v.name, impl.name(), P, rr.total_loss.size(), rr.wall_seconds,
      rr.total_loss.empty() ? 0.0 : rr.total_loss.back(), rr.record_path);
  return kExitOk;
}

}  // namespace

int run_one(const RunCommandOptions& opt) {
  scenario::Scenario sc = opt.scenario.empty()
                              ? scenario::parse_scenario(scenarios::default_scenario_text(),
                                                         "<embedded default scenario>")
                              : scenario::load_scenario(opt.scenario);
  if (!opt.device.empty()) {
    sc.training.device = config::parse_enum<config::Device>(opt.device, "--device");
  }
  apply_training_flags(opt.training, sc.training, sc.variants);
  const config::VariantSpec& v = sc.variant(opt.variant);
  if (!v.resume_of.empty() && !sc.training.resume_from) {
    throw variant_error(
        sc, v.name,
        fmt::format("resumes variant \"{}\" at step {}: give its record, --resume {}.h5:{} "
                    "(made by `run --variant {} --save-optimizer-state`)",
                    v.resume_of, v.resume_step, v.resume_of, v.resume_step, v.resume_of));
  }
  if (!v.resume_of.empty()) {  // the record and step the scenario names, not another run's
    const config::RecordRef& ref = *sc.training.resume_from;
    if (ref.step != v.resume_step) {
      throw variant_error(sc, v.name,
                          fmt::format("resumes variant \"{}\" at step {}, but --resume {} names "
                                      "step {}",
                                      v.resume_of, v.resume_step, ref.text(), ref.step));
    }
    const record::AttrMap attrs = record::RecordReader(ref.path).attrs();
    const auto it = attrs.find("variant");
    if (it != attrs.end() && std::holds_alternative<std::string>(it->second) &&
        std::get<std::string>(it->second) != v.resume_of) {
      throw variant_error(sc, v.name,
                          fmt::format("resumes variant \"{}\", but --resume {} is a record of "
                                      "variant \"{}\"",
                                      v.resume_of, ref.text(), std::get<std::string>(it->second)));
    }
  }
  auto impl = make_implementation(v.implementation);
  engine::RunPlan plan;
  try {
    plan = engine::plan_variant(sc.model, sc.training, v, *impl);
  } catch (const InputError& e) {
    throw variant_error(sc, v.name, e.what());
  }
  if (opt.print_world_size) {
    std::cout << plan.world_size() << "\n";
    return kExitOk;
  }
  {
    // One process holds every rank (no launcher) or one rank per process / GPU.
    uint64_t disk_budget = free_disk_bytes(
        std::filesystem::path(opt.out.empty() ? "runs" : opt.out).parent_path().string());
    const int device = opt.launcher == "env" || opt.launcher == "mpi"
                           ? gpu::launch_env_from_environment(opt.launcher).local_rank
                           : 0;
    require_variant_resources(
        plan, *impl, opt.max_memory, opt.launcher.empty(), device, disk_budget,
        fmt::format("{}: variant \"{}\"", sc.variant_location(v.name), v.name));
  }
  engine::RunOptions ro;
  ro.scenario_name = sc.name;
  ro.scenario_text = sc.text;  // what made the record (compare --localize, golden --records)
  ro.recv_timeout = std::chrono::milliseconds(int64_t{opt.timeout_s} * 1000);
  ro.record_path = opt.out.empty() ? fmt::format("runs/{}/{}.h5", sc.name, v.name) : opt.out;
  {
    // The record must not replace what the run reads (--init-from R.h5 --out R.h5).
    FileRoles files;
    add_scenario_inputs(files, sc);
    files.planned_output(opt.out.empty() ? "the record (default path)" : "--out", ro.record_path);
  }
  std::unique_ptr<transport::Transport> transport;
  int rank = -1;
  // The record's directory, before any rank starts (only rank 0 writes, but a missing directory
  // must fail before communicators exist, not in the middle of their setup).
  const bool writes_record = opt.launcher.empty() || opt.launcher == "threads" ||
                             gpu::launch_env_from_environment(opt.launcher).rank == 0;
  if (writes_record) {
    std::error_code ec;
    const auto parent = std::filesystem::path(ro.record_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) {
      throw InputError(fmt::format("--out {}: cannot create {}: {}", ro.record_path,
                                   parent.string(), ec.message()));
    }
    check_output_file("--out", ro.record_path);  // a directory, a device, no permission: exit 2
  }
  if (opt.launcher == "threads") return run_threads_per_gpu(sc, plan, *impl, ro, opt);
  if (!opt.launcher.empty()) {
    const gpu::LaunchEnv env = gpu::launch_env_from_environment(opt.launcher);
    if (env.world_size != plan.world_size()) {
      throw InputError(
          fmt::format("launcher: WORLD_SIZE = {} but variant \"{}\" has {} ranks "
                      "(P = {})",
                      env.world_size, v.name, plan.world_size(), plan.pipeline_size()));
    }
    if (sc.training.device != config::Device::kCuda) {
      throw InputError("--launcher needs device cuda (one GPU per rank, NCCL)");
    }
    rank = env.rank;
    gpu::set_current_device(env.local_rank);
    ro.device_index = env.local_rank;
    ro.local_ranks = {env.rank};
    transport = gpu::make_nccl_transport(env, env.local_rank, ro.recv_timeout);
    ro.transport = transport.get();
  }
  engine::RunResult rr;
  try {
    rr = engine::run_variant(plan, *impl, sc.data, ro);
  } catch (const InputError& e) {
    throw variant_error(sc, v.name, e.what());
  }
  if (rank <= 0) {
    std::cout << fmt::format(
        "variant {} ({}, {}) on {}: {} steps in {:.2f} s, final total loss {:.9g}, "
        "record {}\n",
        v.name, impl->name(), plan.layout.text, config::enum_name(sc.training.device),
        rr.total_loss.size(), rr.wall_seconds, rr.total_loss.empty() ? 0.0 : rr.total_loss.back(),
        rr.record_path);
  } else {
    std::cout << fmt::format("rank {} finished variant {} in {:.2f} s\n", rank, v.name,
                             rr.wall_seconds);
  }
  return kExitOk;
}

}  // namespace mtp::cli
