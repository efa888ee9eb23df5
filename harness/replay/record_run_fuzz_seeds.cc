// Writes the seed corpus of record_run_fuzzer: recipes (record_run_fuzz_recipe.h) of a tiny
// model's records as the harness writes them (P = 1 and P = 2 with V = 2, DP = 2), as
// Megatron-LM's own record gives them (sizes derived from the weights), an MoE one, and broken
// ones: a scalar linear_fc2 and linear_qkv, P and data_parallel_size of 2^32 + 1, clip_grad NaN
// and −1, V against the layout, a layer index of 2^63 (issue 19). Three of them are also written
// as HDF5 files (RecordWriter's format, as record_fuzz_seeds writes its seeds), each < 100 KB.
// Usage: record_run_fuzz_seeds DIR   (ci/sanitize.sh's build has it; the output is checked in at
// harness/replay/fuzz_corpus/record_run_fuzzer/).
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/config/param_specs.h"
#include "harness/layout/layout.h"
#include "harness/replay/record_run_fuzz_recipe.h"

namespace {

using mtp::config::ModelConfig;

ModelConfig tiny_model() {
  ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.ffn_hidden_size = 16;
  c.num_attention_heads = 2;
  c.num_query_groups = 2;
  c.vocab_size = 16;
  c.seq_length = 4;
  c.micro_batch_size = 1;
  c.mtp_num_layers = 1;
  return c;
}

/// The root attributes of a record of `c`, as engine/step_recorder.cc writes them (a subset).
std::map<std::string, std::string> harness_attrs(const ModelConfig& c) {
  auto i = [](int64_t v) { return "i " + std::to_string(v); };
  return {{"num_layers", i(c.num_layers)},
          {"hidden_size", i(c.hidden_size)},
          {"ffn_hidden_size", i(c.ffn_hidden_size)},
          {"num_attention_heads", i(c.num_attention_heads)},
          {"num_query_groups", i(c.num_query_groups)},
          {"kv_channels", i(c.kv_channels())},
          {"vocab_size", i(c.vocab_size)},
          {"seq_length", i(c.seq_length)},
          {"micro_batch_size", i(c.micro_batch_size)},
          {"mtp_num_layers", i(c.mtp_num_layers)},
          {"mtp_loss_scaling_factor", "d 0.1"},
          {"rotary_base", "d 10000"},
          {"norm_epsilon", "d 1e-05"},
          {"untie_embeddings_and_output_weights", "i 1"},
          {"kernels", "s torch"},
          {"num_moe_experts", "i 0"},
          {"lr", "d 0.001"},
          {"adam_beta1", "d 0.9"},
          {"adam_beta2", "d 0.95"},
          {"adam_eps", "d 1e-08"},
          {"weight_decay", "d 0.01"},
          {"clip_grad", "d 1"},
          {"variant", "s ref_p1"},
          {"implementation", "s reference"},
          {"layout", "s " + mtp::layout::default_layout(1, 1, 2, 1).text},
          {"P", "i 1"},
          {"V", "i 1"},
          {"M", "i 2"},
          {"data_parallel_size", "i 1"},
          {"optimizer", "s adam"},
          {"embedding_copy_update", "s replicated"},
          {"ddp_bucket_size", "i 0"},
          {"microbatch_group_size", "i 0"},
          {"schedule", "s no_pipelining"},
          {"overlap_p2p_comm", "i 0"},
          {"seed", "i 1234"},
          {"dtype", "s float32"},
          {"device", "s cpu"}};
}

/// The recipe of a record of `c` with `attrs`, weights at step 0 (`shapes` overriding or adding
/// some) and a batch of K microbatches at steps 1 and 2.
std::string recipe(const ModelConfig& c, const std::map<std::string, std::string>& attrs, int64_t K,
                   std::map<std::string, std::vector<int64_t>> shapes = {}) {
  std::string out = "# record_run_fuzzer recipe (record_run_fuzz_recipe.h)\n";
  for (const auto& [k, v] : attrs) out += "a " + k + " " + v + "\n";
  auto weight = [&](const std::string& name, const std::vector<int64_t>& shape) {
    out += "w 0 weight " + name + " float32";
    for (int64_t d : shape) out += " " + std::to_string(d);
    out += "\n";
  };
  for (const auto& s : mtp::config::parameter_specs(c)) {
    const auto it = shapes.find(s.name);
    weight(s.name, it == shapes.end() ? s.shape : it->second);
    if (it != shapes.end()) shapes.erase(it);
  }
  for (const auto& [name, shape] : shapes) weight(name, shape);
  for (int step = 1; step <= 2; ++step) {
    const std::string dims = " " + std::to_string(K) + " " + std::to_string(c.micro_batch_size) +
                             " " + std::to_string(c.seq_length) + "\n";
    out += "w " + std::to_string(step) + " batch tokens int32" + dims;
    out += "w " + std::to_string(step) + " batch labels int32" + dims;
    out += "w " + std::to_string(step) + " batch loss_mask uint8" + dims;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const ModelConfig c = tiny_model();
  const auto base = harness_attrs(c);
  auto with = [&](std::map<std::string, std::string> changes) {
    auto a = base;
    for (const auto& [k, v] : changes) {
      if (v.empty()) {
        a.erase(k);
      } else {
        a[k] = v;
      }
    }
    return a;
  };
  const std::string fc2 = "decoder.layers.0.mlp.linear_fc2.weight";
  const std::string qkv = "decoder.layers.0.self_attention.linear_qkv.weight";
  ModelConfig moe = c;
  moe.num_moe_experts = 2;
  moe.moe_router_topk = 1;
  moe.moe_ffn_hidden_size = 8;
  const std::map<std::string, std::string> seeds = {
      {"harness", recipe(c, base, 2)},
      {"harness_p2v2_dp2", recipe(c,
                                  with({{"P", "i 2"},
                                        {"V", "i 2"},
                                        {"layout", "s E|t|t|mL"},
                                        {"data_parallel_size", "i 2"},
                                        {"M", "i 2"},
                                        {"schedule", "s interleaved"},
                                        {"optimizer", "s distributed_adam"}}),
                                  4)},
      {"megatron", recipe(c,
                          {{"M", "i 2"},
                           {"P", "i 1"},
                           {"V", "i 1"},
                           {"dtype", "s float32"},
                           {"num_attention_heads", "i 2"},
                           {"mtp_loss_scaling_factor", "d 0.1"},
                           {"layout", "s E t* m* L (no pipeline parallelism)"}},
                          2)},
      {"moe", recipe(moe,
                     with({{"num_moe_experts", "i 2"},
                           {"moe_router_topk", "i 1"},
                           {"moe_ffn_hidden_size", "i 8"},
                           {"moe_layer_freq", "s [1,1]"},
                           {"moe_router_enable_expert_bias", "i 0"},
                           {"moe_router_score_function", "s sigmoid"}}),
                     2)},
      {"fc2_scalar", recipe(c, with({{"ffn_hidden_size", ""}}), 2, {{fc2, {}}})},
      {"qkv_scalar", recipe(c, with({{"num_query_groups", ""}}), 2, {{qkv, {}}})},
      {"p_2p32", recipe(c, with({{"P", "i 4294967297"}}), 2)},
      {"dp_2p32", recipe(c, with({{"data_parallel_size", "i 4294967297"}}), 2)},
      {"clip_nan", recipe(c, with({{"clip_grad", "d nan"}}), 2)},
      {"clip_negative", recipe(c, with({{"clip_grad", "d -1"}}), 2)},
      {"v_mismatch", recipe(c, with({{"V", "i 3"}}), 2)},
      {"layer_2p63", recipe(c, with({{"num_layers", ""}}), 2,
                            {{"decoder.layers.9223372036854775808.input_layernorm.weight", {8}}})},
  };
  for (const auto& [name, text] : seeds) {
    std::ofstream(dir + "/" + name + ".txt") << text;
  }
  for (const char* name : {"harness", "megatron", "fc2_scalar"}) {
    if (!mtp::replay::fuzz::write_recipe_record(seeds.at(name), dir + "/" + name + ".h5")) {
      std::fprintf(stderr, "record_run_fuzz_seeds: %s was refused\n", name);
      return 1;
    }
  }
  return 0;
}
