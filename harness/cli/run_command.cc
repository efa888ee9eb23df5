#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/engine/trainer.h"
#include "harness/gpu/gpu.h"
#include "harness/scenario/scenario.h"
#include "scenarios/embedded.h"

namespace mtp::cli {

int run_one(const RunCommandOptions& opt) {
  scenario::Scenario sc = opt.scenario.empty()
                              ? scenario::parse_scenario(scenarios::default_scenario_text(),
                                                         "<embedded default scenario>")
                              : scenario::load_scenario(opt.scenario);
  if (!opt.device.empty()) {
    if (opt.device != "cpu" && opt.device != "cuda") {
      throw InputError(fmt::format("--device {}: accepted cpu, cuda", opt.device));
    }
    sc.training.device = opt.device;
  }
  const engine::VariantSpec& v = sc.variant(opt.variant);
  auto impl = make_implementation(v.implementation);
  engine::RunOptions ro;
  ro.scenario_name = sc.name;
  ro.recv_timeout = std::chrono::milliseconds(int64_t{opt.timeout_s} * 1000);
  ro.record_path = opt.out.empty() ? fmt::format("runs/{}/{}.h5", sc.name, v.name) : opt.out;
  std::unique_ptr<transport::Transport> transport;
  int rank = -1;
  if (!opt.launcher.empty()) {
    const gpu::LaunchEnv env = gpu::launch_env_from_environment(opt.launcher);
    const auto layout = engine::variant_layout(v, sc.model);
    if (env.world_size != layout.pipeline_size) {
      throw InputError(fmt::format("launcher: WORLD_SIZE = {} but variant \"{}\" has P = {}",
                                   env.world_size, v.name, layout.pipeline_size));
    }
    if (sc.training.device != "cuda") {
      throw InputError("--launcher needs device cuda (one GPU per rank, NCCL)");
    }
    rank = env.rank;
    gpu::set_current_device(env.local_rank);
    ro.device_index = env.local_rank;
    ro.local_ranks = {env.rank};
    transport = gpu::make_nccl_transport(env, env.local_rank, ro.recv_timeout);
    ro.transport = transport.get();
  }
  if (rank <= 0) {
    std::error_code ec;
    const auto parent = std::filesystem::path(ro.record_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) throw InputError(fmt::format("--out {}: cannot create {}: {}", ro.record_path, parent.string(), ec.message()));
  }
  engine::RunResult rr;
  try {
    rr = engine::run_variant(sc.model, sc.training, sc.data, v, *impl, ro);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: variant \"{}\": {}", sc.source, v.name, e.what()));
  }
  if (rank <= 0) {
    std::cout << fmt::format("variant {} ({}, {}) on {}: {} steps in {:.2f} s, final total loss {:.9g}, "
                             "record {}\n", v.name, v.implementation, v.layout.empty() ? "default split" : v.layout,
                             sc.training.device, rr.total_loss.size(), rr.wall_seconds,
                             rr.total_loss.empty() ? 0.0 : rr.total_loss.back(), rr.record_path);
  } else {
    std::cout << fmt::format("rank {} finished variant {} in {:.2f} s\n", rank, v.name, rr.wall_seconds);
  }
  return kExitOk;
}

}  // namespace mtp::cli
