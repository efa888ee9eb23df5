// File: harness/sim/presets.h
//
// Named models for `mtp-harness simulate --preset`: DeepSeek-V3 (arXiv:2412.19437 §4.2 and its
// config.json): 61 layers, the first 3 dense, MoE after (256 routed experts of F_moe 2048, top 8,
// one shared expert), H 7168, 128 heads, dense F 18432, vocabulary 129280, sequence 4096, one
// MTP depth. Attention is priced as the harness's (grouped-query with 128 query groups) not MLA;
// the node costs decide the time, the dimensions only the activation and message bytes.
// Torch-free.
#pragma once

#include <string>
#include <vector>

#include "harness/config/model_config.h"

namespace mtp::sim {

/// The model of preset `name` ("dsv3"; "small": train_step_benchmark's small model, 8 dense
/// layers, H 1024, F 2816, 16 heads, V 32768, s 2048, b 1, D 1; or "tiny": 4 layers, H 64, dense
/// layer 0 then MoE with 4 experts, D = 1, s 32, b 2, for tests on the CPU); throws InputError
/// naming the accepted presets.
config::ModelConfig preset_model(const std::string& name);
/// The preset names.
std::vector<std::string> preset_names();

}  // namespace mtp::sim
