#include "harness/replay/record_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <set>

#include "harness/common/error.h"
#include "harness/config/param_specs.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"

namespace mtp::replay {
namespace {

using record::RecordError;

/// The record's root attributes, read with errors that name the record and the attribute.
class Attrs {
 public:
  explicit Attrs(const record::RecordReader& rec) : path_(rec.path()), map_(rec.attrs()) {}

  bool has(const std::string& key) const { return map_.count(key) > 0; }

  std::optional<int64_t> int_of(const std::string& key) const {
    const auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    if (const auto* i = std::get_if<int64_t>(&it->second)) return *i;
    if (const auto* d = std::get_if<double>(&it->second)) {
      if (std::isfinite(*d) && *d == std::floor(*d) && std::abs(*d) < 9.0e15) {
        return static_cast<int64_t>(*d);
      }
    }
    throw RecordError(fmt::format("{}: attribute '{}' must be an integer", path_, key));
  }
  std::optional<double> double_of(const std::string& key) const {
    const auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    if (const auto* d = std::get_if<double>(&it->second)) return *d;
    if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
    throw RecordError(fmt::format("{}: attribute '{}' must be a number", path_, key));
  }
  std::optional<std::string> string_of(const std::string& key) const {
    const auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
    throw RecordError(fmt::format("{}: attribute '{}' must be a string", path_, key));
  }
  [[noreturn]] void missing(const std::string& key, const std::string& why) const {
    throw RecordError(fmt::format("{}: attribute '{}' is missing ({})", path_, key, why));
  }
  [[noreturn]] void bad(const std::string& key, const std::string& why) const {
    throw RecordError(fmt::format("{}: attribute '{}': {}", path_, key, why));
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  record::AttrMap map_;
};

/// Names and shapes of the weights at one step (the replay's starting weights).
struct Weights {
  const record::RecordReader* rec = nullptr;
  int step = 0;
  std::vector<std::string> names;
  std::vector<int64_t> shape(const std::string& n) const {
    return rec->describe(step, "weight", n).shape;
  }
  record::DType dtype(const std::string& n) const { return rec->describe(step, "weight", n).dtype; }
  bool has(const std::string& n) const {
    return std::find(names.begin(), names.end(), n) != names.end();
  }
  /// 1 + the largest i of names "<prefix><i>.<suffix>", 0 when there is none.
  int64_t count(const std::string& prefix, const std::string& suffix) const {
    const std::regex re(std::regex_replace(prefix, std::regex(R"([.])"), R"(\.)") + "([0-9]+)\\." +
                        std::regex_replace(suffix, std::regex(R"([.])"), R"(\.)"));
    int64_t n = 0;
    for (const auto& name : names) {
      std::smatch m;
      if (std::regex_match(name, m, re)) n = std::max<int64_t>(n, std::stoll(m[1]) + 1);
    }
    return n;
  }
};

/// Reads the model; `w` are the starting weights, `batch_shape` the first replayed batch's
/// [K, b, s].
config::ModelConfig read_model(const Attrs& a, const Weights& w,
                               const std::vector<int64_t>& batch_shape,
                               std::vector<std::string>& notes) {
  config::ModelConfig c;
  const std::string emb = config::kWordEmbeddingName;
  const std::vector<int64_t> emb_shape =
      w.has(emb) ? w.shape(emb) : std::vector<int64_t>{};
  // An integer attribute, else `derived` (with a note saying from what), else an error.
  auto int_attr = [&](const char* key, std::optional<int64_t> derived, const std::string& from) {
    if (auto v = a.int_of(key)) return *v;
    if (!derived) a.missing(key, "and not derivable from " + from);
    notes.push_back(fmt::format("{}: {} (derived from {})", key, *derived, from));
    return *derived;
  };
  auto maybe = [](bool ok, int64_t v) { return ok ? std::optional<int64_t>(v) : std::nullopt; };
  const bool has_emb = emb_shape.size() == 2;
  c.vocab_size = int_attr("vocab_size", maybe(has_emb, has_emb ? emb_shape[0] : 0),
                          "the word embedding's shape");
  c.hidden_size = int_attr("hidden_size", maybe(has_emb, has_emb ? emb_shape[1] : 0),
                           "the word embedding's shape");
  const int64_t layers = w.count("decoder.layers.", "input_layernorm.weight");
  c.num_layers = int_attr("num_layers", maybe(layers > 0, layers), "the weights' names");
  c.mtp_num_layers = int_attr("mtp_num_layers", w.count("mtp.layers.", "enorm.weight"),
                              "the weights' names");
  c.micro_batch_size = int_attr("micro_batch_size", batch_shape[1], "the batch's shape");
  c.seq_length = int_attr("seq_length", batch_shape[2], "the batch's shape");
  if (auto nh = a.int_of("num_attention_heads")) {
    c.num_attention_heads = *nh;
  } else {
    a.missing("num_attention_heads", "the heads cannot be told from the weights' shapes");
  }
  // Everything below divides by these: a record that says 0 is refused here, not by a SIGFPE.
  if (c.num_attention_heads <= 0) a.bad("num_attention_heads", "must be positive");
  if (c.hidden_size <= 0) a.bad("hidden_size", "must be positive");
  const std::string fc2 = "decoder.layers.0.mlp.linear_fc2.weight";
  const bool has_fc2 = w.has(fc2);
  c.ffn_hidden_size = int_attr("ffn_hidden_size", maybe(has_fc2, has_fc2 ? w.shape(fc2)[1] : 0),
                               "decoder layer 0's linear_fc2 shape");
  const std::string qkv = "decoder.layers.0.self_attention.linear_qkv.weight";
  std::optional<int64_t> groups;
  if (w.has(qkv) && c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0) {
    const int64_t hn = c.hidden_size / c.num_attention_heads, rows = w.shape(qkv)[0];
    if (hn > 0 && rows % hn == 0 && (rows / hn - c.num_attention_heads) % 2 == 0) {
      groups = (rows / hn - c.num_attention_heads) / 2;
    }
  }
  c.num_query_groups = int_attr("num_query_groups", groups, "linear_qkv's rows");
  if (auto kv = a.int_of("kv_channels"); kv && *kv != c.kv_channels()) {
    a.bad("kv_channels", fmt::format("{} differs from hidden_size / num_attention_heads = {}, the "
                                     "only kv_channels this build supports", *kv,
                                     c.kv_channels()));
  }
  if (auto v = a.double_of("mtp_loss_scaling_factor")) {
    c.mtp_loss_scaling_factor = *v;
  } else if (c.mtp_num_layers > 0) {
    a.missing("mtp_loss_scaling_factor", "λ scales every MTP gradient");
  }
  for (const auto& [key, field, value] :
       {std::tuple{"rotary_base", &config::ModelConfig::rotary_base, 10000.0},
        std::tuple{"norm_epsilon", &config::ModelConfig::norm_epsilon, 1e-5}}) {
    if (auto v = a.double_of(key)) {
      c.*field = *v;
    } else {
      c.*field = value;
      notes.push_back(fmt::format("{}: {} (Megatron-LM's default)", key, value));
    }
  }
  if (auto v = a.int_of("untie_embeddings_and_output_weights")) {
    c.untie_embeddings = *v != 0;
  } else {
    c.untie_embeddings = w.has(config::kOutputLayerName);
    notes.push_back(fmt::format("untie_embeddings_and_output_weights: {} (the weights {} {})",
                                c.untie_embeddings ? 1 : 0,
                                c.untie_embeddings ? "hold" : "do not hold",
                                config::kOutputLayerName));
  }
  if (auto k = a.string_of("kernels")) {
    try {
      c.kernels = config::parse_enum<config::Kernels>(*k);
    } catch (const InputError& e) {
      a.bad("kernels", e.what());
    }
  } else {
    notes.push_back("kernels: torch (LibTorch ops, the harness's default)");
  }
  const auto experts = a.int_of("num_moe_experts");
  if (!experts) {
    for (const auto& n : w.names) {
      if (n.find(".mlp.router.") != std::string::npos) {
        a.missing("num_moe_experts", fmt::format("and the weights hold {}", n));
      }
    }
    notes.push_back("num_moe_experts: 0 (no router among the weights)");
  }
  c.num_moe_experts = experts.value_or(0);
  if (c.num_moe_experts > 0) {
    const std::string moe = "MoE models record it";
    c.moe_router_topk = a.int_of("moe_router_topk").value_or(-1);
    if (c.moe_router_topk < 0) a.missing("moe_router_topk", moe);
    auto ffn = a.int_of("moe_ffn_hidden_size");
    if (!ffn) a.missing("moe_ffn_hidden_size", moe);
    c.moe_ffn_hidden_size = *ffn;
    c.moe_shared_expert_intermediate_size =
        a.int_of("moe_shared_expert_intermediate_size").value_or(0);
    if (a.string_of("moe_router_score_function").value_or("sigmoid") != "sigmoid") {
      a.bad("moe_router_score_function", "this build has the sigmoid router only");
    }
    c.moe_router_enable_expert_bias = a.int_of("moe_router_enable_expert_bias").value_or(0) != 0;
    c.moe_router_topk_scaling_factor =
        a.double_of("moe_router_topk_scaling_factor").value_or(1.0);
    // "[0,1,1]" and "[0.1,-0.2]", as step_recorder.cc writes the lists.
    auto list = [&](const char* key) {
      std::vector<double> out;
      const std::string text = a.string_of(key).value_or("[]");
      if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
        a.bad(key, fmt::format("\"{}\" is not a list \"[a,b,…]\"", text));
      }
      const std::string body = text.substr(1, text.size() - 2);
      for (size_t pos = 0; pos < body.size();) {
        const size_t end = std::min(body.find(',', pos), body.size());
        try {
          out.push_back(std::stod(body.substr(pos, end - pos)));
        } catch (const std::exception&) {
          a.bad(key, fmt::format("\"{}\" is not a list of numbers", text));
        }
        pos = end + 1;
      }
      return out;
    };
    for (double f : list("moe_layer_freq")) c.moe_layer_freq.push_back(static_cast<int>(f));
    c.moe_router_expert_bias = list("moe_router_expert_bias");
  }
  try {
    c.validate();
  } catch (const InputError& e) {
    throw RecordError(fmt::format("{}: the model its attributes describe is invalid: {}",
                                  a.path(), e.what()));
  }
  return c;
}

config::TrainingConfig read_training(const Attrs& a, const Weights& w, bool optimizer_matters,
                                     std::vector<std::string>& notes) {
  config::TrainingConfig t;
  std::vector<std::string> defaulted;
  using T = config::TrainingConfig;
  for (const auto& [key, field] : std::vector<std::pair<const char*, double T::*>>{
           {"lr", &T::lr}, {"adam_beta1", &T::adam_beta1}, {"adam_beta2", &T::adam_beta2},
           {"adam_eps", &T::adam_eps}, {"weight_decay", &T::weight_decay},
           {"clip_grad", &T::clip_grad}}) {
    if (auto v = a.double_of(key)) {
      t.*field = *v;
    } else if (optimizer_matters) {
      a.missing(key, "the replay compares results of an optimizer step");
    } else {
      defaulted.push_back(fmt::format("{} = {}", key, t.*field));
    }
  }
  if (!defaulted.empty()) {
    notes.push_back(fmt::format("{}: the harness's defaults (not in the record; nothing compared "
                                "depends on an optimizer step)", fmt::join(defaulted, ", ")));
  }
  if (auto d = a.string_of("dtype")) {
    try {
      t.dtype = config::parse_enum<config::DType>(*d);
    } catch (const InputError& e) {
      a.bad("dtype", e.what());
    }
  } else if (w.has(config::kWordEmbeddingName) &&
             (w.dtype(config::kWordEmbeddingName) == record::DType::kF32 ||
              w.dtype(config::kWordEmbeddingName) == record::DType::kF64)) {
    const bool f64 = w.dtype(config::kWordEmbeddingName) == record::DType::kF64;
    t.dtype = f64 ? config::DType::kFloat64 : config::DType::kFloat32;
    notes.push_back(fmt::format("dtype: {} (the weights' dtype)", config::enum_name(t.dtype)));
  } else {
    a.missing("dtype", "and the weights are neither float32 nor float64");
  }
  const std::string device = a.string_of("device").value_or("(absent)");
  if (device == "cpu" || device == "cuda") {
    t.device = config::parse_enum<config::Device>(device);
  } else {
    notes.push_back(fmt::format("device: cpu (the record's \"{}\" is not cpu or cuda; --device "
                                "chooses)", device));
  }
  if (auto s = a.int_of("seed")) t.seed = static_cast<uint64_t>(*s);
  return t;
}

config::VariantSpec read_variant(const Attrs& a, const config::ModelConfig& model,
                                 std::vector<std::string>& notes) {
  config::VariantSpec v;
  v.name = a.string_of("variant").value_or("replay");
  const std::string impl = a.string_of("implementation").value_or("(absent)");
  if (impl == "reference" || impl == "candidate") {
    v.implementation = config::parse_enum<config::Implementation>(impl);
  } else {
    notes.push_back(fmt::format("implementation: reference (the record's \"{}\" is not one of "
                                "this build's; the reference keeps MTP with the loss, as "
                                "Megatron-LM's GPTModel does; --variant-like chooses)", impl));
  }
  v.pipeline_size = static_cast<int>(a.int_of("P").value_or(1));
  v.virtual_size = static_cast<int>(a.int_of("V").value_or(1));
  if (!a.has("P")) notes.push_back("P: 1 (not in the record)");
  const std::string text = a.string_of("layout").value_or("");
  try {
    layout::build_layout(text, v.pipeline_size, static_cast<int>(model.num_layers),
                         static_cast<int>(model.mtp_num_layers));
    v.layout = text;
  } catch (const InputError& e) {
    if (v.pipeline_size != 1 || v.virtual_size != 1) {
      a.bad("layout", fmt::format("\"{}\" is not a layout for P = {}: {} (--variant-like chooses "
                                  "one)", text, v.pipeline_size, e.what()));
    }
    notes.push_back(fmt::format("layout: the P = 1 layout (the record's \"{}\" is not a layout "
                                "string; P = V = 1)", text));
  }
  if (auto s = a.string_of("schedule")) {
    try {
      v.schedule = schedule::parse_schedule_kind(*s);
    } catch (const InputError&) {
      notes.push_back(fmt::format("schedule: derived from P and V (the record's \"{}\" is not a "
                                  "schedule name)", *s));
    }
  }
  v.microbatch_group_size = static_cast<int>(a.int_of("microbatch_group_size").value_or(0));
  v.overlap_p2p = a.int_of("overlap_p2p_comm").value_or(0) != 0;
  v.cuda_graphs = a.int_of("cuda_graphs").value_or(0) != 0;
  v.data_parallel_size = static_cast<int>(a.int_of("data_parallel_size").value_or(1));
  if (!a.has("data_parallel_size")) notes.push_back("data_parallel_size: 1 (not in the record)");
  if (auto o = a.string_of("optimizer")) {
    try {
      v.optimizer = config::parse_enum<config::Optimizer>(*o);
    } catch (const InputError& e) {
      a.bad("optimizer", e.what());
    }
  } else if (auto d = a.int_of("use_distributed_optimizer")) {
    v.optimizer = *d ? config::Optimizer::kDistributedAdam : config::Optimizer::kAdam;
  }
  if (auto e = a.string_of("embedding_copy_update")) {
    try {
      v.embedding_copy_update = config::parse_enum<config::EmbeddingCopyUpdate>(*e);
    } catch (const InputError& err) {
      a.bad("embedding_copy_update", err.what());
    }
  }
  v.ddp_bucket_size = a.int_of("ddp_bucket_size").value_or(0);
  return v;
}

}  // namespace

RecordRun read_record_run(const record::RecordReader& rec, const ReplaySteps& steps,
                          bool optimizer_matters) {
  const Attrs a(rec);
  const int start = steps.first - 1;
  const std::vector<int> present = rec.steps();
  auto has_group = [&](int step, const std::string& group) {
    if (!std::binary_search(present.begin(), present.end(), step)) return false;
    const auto g = rec.groups(step);
    return std::find(g.begin(), g.end(), group) != g.end();
  };
  if (!has_group(start, "weight")) {
    throw RecordError(fmt::format("{}: has no weights at step {} (replaying from step {} starts "
                                  "from them)", rec.path(), start, steps.first));
  }
  if (!has_group(steps.first, "batch")) {
    throw RecordError(fmt::format("{}: has no batch at step {}", rec.path(), steps.first));
  }
  Weights w;
  w.rec = &rec;
  w.step = start;
  w.names = rec.names(start, "weight");
  const std::vector<int64_t> batch = rec.describe(steps.first, "batch", "tokens").shape;
  if (batch.size() != 3) {
    throw RecordError(fmt::format("{}: steps/{}/batch/tokens: shape of rank {}, expected [K, b, "
                                  "s]", rec.path(), record::step_group_name(steps.first),
                                  batch.size()));
  }
  RecordRun run;
  run.model = read_model(a, w, batch, run.notes);
  run.training = read_training(a, w, optimizer_matters, run.notes);
  run.training.steps = steps.last;
  run.variant = read_variant(a, run.model, run.notes);
  run.global_microbatches = batch[0];
  const int64_t DP = run.variant.data_parallel_size;
  if (DP < 1 || run.global_microbatches % DP != 0) {
    a.bad("data_parallel_size", fmt::format("{} does not divide the batch's {} microbatches", DP,
                                            run.global_microbatches));
  }
  auto M = a.int_of("M");
  if (!M) M = a.int_of("num_microbatches");
  if (!M) {
    M = run.global_microbatches / DP;
    run.notes.push_back(fmt::format("M: {} (the batch's {} microbatches / DP)", *M,
                                    run.global_microbatches));
  }
  if (*M * DP != run.global_microbatches) {
    a.bad("M", fmt::format("{} microbatches × data_parallel_size {} ≠ the batch's {} "
                           "microbatches", *M, DP, run.global_microbatches));
  }
  run.training.num_microbatches = *M;
  return run;
}

void apply_variant_like(RecordRun& run, const config::VariantSpec& like) {
  const int64_t K = run.global_microbatches;
  if (like.data_parallel_size < 1 || K % like.data_parallel_size != 0) {
    throw InputError(fmt::format("--variant-like {}: dp = {} does not divide the record's {} "
                                 "microbatches per step", like.name, like.data_parallel_size, K));
  }
  config::VariantSpec v = like;
  v.clip_grad.reset();
  v.mtp_loss_scaling_factor.reset();
  v.kernels.reset();
  v.untie_embeddings.reset();
  run.variant = v;
  run.training.num_microbatches = K / like.data_parallel_size;
  run.notes.push_back(fmt::format(
      "--variant-like {}: {} {} (P = {}, DP = {}, M = {}, {}); model, hyperparameters and the "
      "global batch from the record", like.name, config::enum_name(like.implementation),
      like.layout.empty() ? "the even split" : "\"" + like.layout + "\"", like.pipeline_size,
      like.data_parallel_size, run.training.num_microbatches,
      config::enum_name(like.optimizer)));
}

}  // namespace mtp::replay
