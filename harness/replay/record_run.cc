#include "harness/replay/record_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "harness/common/error.h"
#include "harness/common/utf8.h"
#include "harness/config/param_specs.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"

namespace mtp::replay {
namespace {

using record::RecordError;

/// What one replay runs, as the CLI's --pp, --dp and --microbatches allow (cli/main.cc), and V
/// up to the schedule tools' bound.
constexpr int64_t kMaxPipelineSize = 64;
constexpr int64_t kMaxDataParallelSize = 64;
constexpr int64_t kMaxVirtualSize = 4096;
constexpr int64_t kMaxMicrobatches = 100000;

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
  /// An integer attribute in [lo, hi], checked before anything narrows it: RecordError naming
  /// the attribute, its value and the range otherwise.
  std::optional<int64_t> int_in(const std::string& key, int64_t lo, int64_t hi) const {
    const auto v = int_of(key);
    if (v && (*v < lo || *v > hi)) {
      throw RecordError(
          fmt::format("{}: attribute '{}' is {}, outside the range [{}, {}] this "
                      "build runs",
                      path_, key, *v, lo, hi));
    }
    return v;
  }
  /// A 0/1 attribute (Megatron's booleans), `absent` when missing.
  bool flag(const std::string& key, bool absent) const {
    const auto v = int_in(key, 0, 1);
    return v ? *v != 0 : absent;
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

/// Largest layer count the harness runs (ModelConfig::validate): a layer index in a weight's
/// name is below it.
constexpr int64_t kMaxLayers = 1024;

/// Names and shapes of the weights at one step (the replay's starting weights).
struct Weights {
  const record::RecordReader* rec = nullptr;
  int step = 0;
  std::vector<std::string> names;
  /// "<record>: steps/000000/weight/<name>", as errors name a weight.
  std::string where(const std::string& n) const {
    return fmt::format("{}: steps/{}/weight/{}", rec->path(), record::step_group_name(step),
                       printable(n));
  }
  std::vector<int64_t> shape(const std::string& n) const {
    return rec->describe(step, "weight", n).shape;
  }
  /// The shape of weight `n`, which must be of rank dims.size() (`dims` names each dimension):
  /// RecordError naming the record, the weight, its shape and the rank expected otherwise.
  std::vector<int64_t> shape_of_rank(const std::string& n,
                                     const std::vector<const char*>& dims) const {
    std::vector<int64_t> s = shape(n);
    if (s.size() != dims.size()) {
      throw RecordError(fmt::format("{}: shape [{}] of rank {}, expected rank {} ([{}])", where(n),
                                    fmt::join(s, ", "), s.size(), dims.size(),
                                    fmt::join(dims, ", ")));
    }
    return s;
  }
  record::DType dtype(const std::string& n) const { return rec->describe(step, "weight", n).dtype; }
  bool has(const std::string& n) const {
    return std::find(names.begin(), names.end(), n) != names.end();
  }
  /// 1 + the largest i of names "<prefix><i>.<suffix>" (i decimal digits), 0 when there is none.
  /// Throws RecordError naming the weight when i is kMaxLayers or more (a layer the harness
  /// cannot build; 2^63 and beyond included, which std::stoll threw out_of_range for).
  int64_t count(const std::string& prefix, const std::string& suffix) const {
    const std::string tail = "." + suffix;
    int64_t n = 0;
    for (const auto& name : names) {
      if (name.size() <= prefix.size() + tail.size() ||
          name.compare(0, prefix.size(), prefix) != 0 ||
          name.compare(name.size() - tail.size(), tail.size(), tail) != 0) {
        continue;
      }
      const char* first = name.data() + prefix.size();
      const char* last = name.data() + name.size() - tail.size();
      if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) continue;
      int64_t i = 0;
      const auto [end, ec] = std::from_chars(first, last, i);
      if (ec != std::errc() || end != last || i >= kMaxLayers) {
        const std::string digits(first, last);
        throw RecordError(fmt::format(
            "{}: layer index {} is out of range: at most {} (num_layers <= {})", where(name),
            digits.size() <= 24 ? digits : fmt::format("of {} digits", digits.size()),
            kMaxLayers - 1, kMaxLayers));
      }
      n = std::max<int64_t>(n, i + 1);
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
      w.has(emb) ? w.shape_of_rank(emb, {"vocab_size", "hidden_size"}) : std::vector<int64_t>{};
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
  c.mtp_num_layers =
      int_attr("mtp_num_layers", w.count("mtp.layers.", "enorm.weight"), "the weights' names");
  c.micro_batch_size = int_attr("micro_batch_size", batch_shape[1], "the batch's shape");
  c.seq_length = int_attr("seq_length", batch_shape[2], "the batch's shape");
  // The batch is what the replay trains on: its b and s are the model's.
  if (c.micro_batch_size != batch_shape[1] || c.seq_length != batch_shape[2]) {
    a.bad(c.micro_batch_size != batch_shape[1] ? "micro_batch_size" : "seq_length",
          fmt::format("{} × {} (micro_batch_size × seq_length) differs from the batch's shape [{}, "
                      "{}, {}]",
                      c.micro_batch_size, c.seq_length, batch_shape[0], batch_shape[1],
                      batch_shape[2]));
  }
  if (auto nh = a.int_of("num_attention_heads")) {
    c.num_attention_heads = *nh;
  } else {
    a.missing("num_attention_heads", "the heads cannot be told from the weights' shapes");
  }
  // Everything below divides by these: a record that says 0 is refused here, not by a SIGFPE.
  if (c.num_attention_heads <= 0) a.bad("num_attention_heads", "must be positive");
  if (c.hidden_size <= 0) a.bad("hidden_size", "must be positive");
  // Every shape read below has the rank it is read at, and the hidden size it must have when it
  // stands in for a missing attribute (a scalar linear_fc2 crashed the replay: issue 19).
  const std::string fc2 = "decoder.layers.0.mlp.linear_fc2.weight";
  std::optional<int64_t> ffn;
  if (w.has(fc2)) {
    const auto shape = w.shape_of_rank(fc2, {"hidden_size", "ffn_hidden_size"});
    if (!a.has("ffn_hidden_size") && shape[0] != c.hidden_size) {
      throw RecordError(
          fmt::format("{}: shape [{}] has {} rows, but hidden_size is {}: it does "
                      "not tell ffn_hidden_size",
                      w.where(fc2), fmt::join(shape, ", "), shape[0], c.hidden_size));
    }
    ffn = shape[1];
  }
  c.ffn_hidden_size = int_attr("ffn_hidden_size", ffn, "decoder layer 0's linear_fc2 shape");
  const std::string qkv = "decoder.layers.0.self_attention.linear_qkv.weight";
  std::optional<int64_t> groups;
  const std::vector<int64_t> qkv_shape =
      w.has(qkv) ? w.shape_of_rank(qkv, {"rows", "hidden_size"}) : std::vector<int64_t>{};
  if (!qkv_shape.empty() && !a.has("num_query_groups") && qkv_shape[1] != c.hidden_size) {
    throw RecordError(
        fmt::format("{}: shape [{}] has {} columns, but hidden_size is {}: it does "
                    "not tell num_query_groups",
                    w.where(qkv), fmt::join(qkv_shape, ", "), qkv_shape[1], c.hidden_size));
  }
  if (!qkv_shape.empty() && c.num_attention_heads > 0 &&
      c.hidden_size % c.num_attention_heads == 0) {
    const int64_t hn = c.hidden_size / c.num_attention_heads, rows = qkv_shape[0];
    if (hn > 0 && rows % hn == 0 && (rows / hn - c.num_attention_heads) % 2 == 0) {
      groups = (rows / hn - c.num_attention_heads) / 2;
    }
  }
  c.num_query_groups = int_attr("num_query_groups", groups, "linear_qkv's rows");
  if (auto kv = a.int_of("kv_channels"); kv && *kv != c.kv_channels()) {
    a.bad("kv_channels", fmt::format("{} differs from hidden_size / num_attention_heads = {}, the "
                                     "only kv_channels this build supports",
                                     *kv, c.kv_channels()));
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
  if (a.has("untie_embeddings_and_output_weights")) {
    c.untie_embeddings = a.flag("untie_embeddings_and_output_weights", false);
  } else {
    c.untie_embeddings = w.has(config::kOutputLayerName);
    notes.push_back(fmt::format(
        "untie_embeddings_and_output_weights: {} (the weights {} {})", c.untie_embeddings ? 1 : 0,
        c.untie_embeddings ? "hold" : "do not hold", config::kOutputLayerName));
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
    c.moe_router_enable_expert_bias = a.flag("moe_router_enable_expert_bias", false);
    c.moe_router_topk_scaling_factor = a.double_of("moe_router_topk_scaling_factor").value_or(1.0);
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
    for (double f : list("moe_layer_freq")) {
      if (f != 0.0 && f != 1.0) {  // NaN and 1e300 too: no narrowing of what is not 0 or 1
        a.bad("moe_layer_freq", fmt::format("holds {}; each entry is 0 (dense) or 1 (MoE)", f));
      }
      c.moe_layer_freq.push_back(static_cast<int>(f));
    }
    c.moe_router_expert_bias = list("moe_router_expert_bias");
  }
  try {
    c.validate();
  } catch (const InputError& e) {
    throw RecordError(
        fmt::format("{}: the model its attributes describe is invalid: {}", a.path(), e.what()));
  }
  return c;
}

config::TrainingConfig read_training(const Attrs& a, const Weights& w, bool optimizer_matters,
                                     std::vector<std::string>& notes) {
  config::TrainingConfig t;
  std::vector<std::string> defaulted;
  using T = config::TrainingConfig;
  for (const auto& [key, field] :
       std::vector<std::pair<const char*, double T::*>>{{"lr", &T::lr},
                                                        {"adam_beta1", &T::adam_beta1},
                                                        {"adam_beta2", &T::adam_beta2},
                                                        {"adam_eps", &T::adam_eps},
                                                        {"weight_decay", &T::weight_decay},
                                                        {"clip_grad", &T::clip_grad}}) {
    if (auto v = a.double_of(key)) {
      t.*field = *v;
      // What the harness's scenarios accept (scenario.cc [training]), finite: a record that
      // says clip_grad = NaN, inf or −1 is refused, not read as "clipping off" (issue 19).
      const double x = *v;
      const bool ok =
          std::isfinite(x) && (field == &T::adam_beta1 || field == &T::adam_beta2 ? x >= 0 && x < 1
                               : field == &T::adam_eps                            ? x > 0
                                                                                  : x >= 0);
      if (!ok) {
        a.bad(key, fmt::format("{} is not {}", x,
                               field == &T::adam_beta1 || field == &T::adam_beta2 ? "in [0, 1)"
                               : field == &T::adam_eps                            ? "finite and > 0"
                               : field == &T::clip_grad ? "finite and >= 0 (0 = clipping off)"
                                                        : "finite and >= 0"));
      }
    } else if (optimizer_matters) {
      a.missing(key, "the replay compares results of an optimizer step");
    } else {
      defaulted.push_back(fmt::format("{} = {}", key, t.*field));
    }
  }
  if (!defaulted.empty()) {
    notes.push_back(
        fmt::format("{}: the harness's defaults (not in the record; nothing compared "
                    "depends on an optimizer step)",
                    fmt::join(defaulted, ", ")));
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
    notes.push_back(
        fmt::format("device: cpu (the record's \"{}\" is not cpu or cuda; --device "
                    "chooses)",
                    device));
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
    notes.push_back(
        fmt::format("implementation: reference (the record's \"{}\" is not one of "
                    "this build's; the reference keeps MTP with the loss, as "
                    "Megatron-LM's GPTModel does; --variant-like chooses)",
                    impl));
  }
  // Every integer is range-checked before it is narrowed to int (P = 2^32 + 1 read as 1 before).
  v.pipeline_size = static_cast<int>(a.int_in("P", 1, kMaxPipelineSize).value_or(1));
  v.virtual_size = static_cast<int>(a.int_in("V", 1, kMaxVirtualSize).value_or(1));
  if (!a.has("P")) notes.push_back("P: 1 (not in the record)");
  const std::string text = a.string_of("layout").value_or("");
  try {
    const layout::PipelineLayout l =
        layout::build_layout(text, v.pipeline_size, static_cast<int>(model.num_layers),
                             static_cast<int>(model.mtp_num_layers));
    v.layout = text;
    // The layout decides V; a record whose V says otherwise describes two different runs.
    if (a.has("V") && v.virtual_size != l.virtual_size) {
      a.bad("V", fmt::format("{} differs from the {} virtual stage(s) that layout \"{}\" has for "
                             "P = {} ({} stages)",
                             v.virtual_size, l.virtual_size, printable(text), v.pipeline_size,
                             l.num_stages()));
    }
    v.virtual_size = l.virtual_size;
  } catch (const layout::LayoutError& e) {
    if (v.pipeline_size != 1 || v.virtual_size != 1) {
      a.bad("layout", fmt::format("\"{}\" is not a layout for P = {}: {} (--variant-like chooses "
                                  "one)",
                                  text, v.pipeline_size, e.what()));
    }
    notes.push_back(
        fmt::format("layout: the P = 1 layout (the record's \"{}\" is not a layout "
                    "string; P = V = 1)",
                    text));
  }
  if (auto s = a.string_of("schedule")) {
    try {
      v.schedule = schedule::parse_schedule_kind(*s);
    } catch (const InputError&) {
      notes.push_back(
          fmt::format("schedule: derived from P and V (the record's \"{}\" is not a "
                      "schedule name)",
                      *s));
    }
  }
  v.microbatch_group_size =
      static_cast<int>(a.int_in("microbatch_group_size", 0, kMaxMicrobatches).value_or(0));
  v.overlap_p2p = a.flag("overlap_p2p_comm", false);
  v.cuda_graphs = a.flag("cuda_graphs", false);
  v.data_parallel_size =
      static_cast<int>(a.int_in("data_parallel_size", 1, kMaxDataParallelSize).value_or(1));
  if (!a.has("data_parallel_size")) notes.push_back("data_parallel_size: 1 (not in the record)");
  if (auto o = a.string_of("optimizer")) {
    try {
      v.optimizer = config::parse_enum<config::Optimizer>(*o);
    } catch (const InputError& e) {
      a.bad("optimizer", e.what());
    }
  } else if (a.has("use_distributed_optimizer")) {
    v.optimizer = a.flag("use_distributed_optimizer", false) ? config::Optimizer::kDistributedAdam
                                                             : config::Optimizer::kAdam;
  }
  if (auto e = a.string_of("embedding_copy_update")) {
    try {
      v.embedding_copy_update = config::parse_enum<config::EmbeddingCopyUpdate>(*e);
    } catch (const InputError& err) {
      a.bad("embedding_copy_update", err.what());
    }
  }
  v.ddp_bucket_size =
      a.int_in("ddp_bucket_size", 0, std::numeric_limits<int64_t>::max()).value_or(0);
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
    throw RecordError(
        fmt::format("{}: has no weights at step {} (replaying from step {} starts "
                    "from them)",
                    rec.path(), start, steps.first));
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
    throw RecordError(
        fmt::format("{}: steps/{}/batch/tokens: shape of rank {}, expected [K, b, "
                    "s]",
                    rec.path(), record::step_group_name(steps.first), batch.size()));
  }
  RecordRun run;
  run.model = read_model(a, w, batch, run.notes);
  run.training = read_training(a, w, optimizer_matters, run.notes);
  run.training.steps = steps.last;
  run.variant = read_variant(a, run.model, run.notes);
  run.global_microbatches = batch[0];
  if (batch[0] < 1 || batch[0] > kMaxMicrobatches) {
    throw RecordError(
        fmt::format("{}: steps/{}/batch/tokens: {} microbatches, outside the range "
                    "[1, {}] this build runs",
                    rec.path(), record::step_group_name(steps.first), batch[0], kMaxMicrobatches));
  }
  const int64_t DP = run.variant.data_parallel_size;
  if (DP < 1 || run.global_microbatches % DP != 0) {
    a.bad("data_parallel_size", fmt::format("{} does not divide the batch's {} microbatches", DP,
                                            run.global_microbatches));
  }
  auto M = a.int_in("M", 1, kMaxMicrobatches);
  if (!M) M = a.int_in("num_microbatches", 1, kMaxMicrobatches);
  if (!M) {
    M = run.global_microbatches / DP;
    run.notes.push_back(
        fmt::format("M: {} (the batch's {} microbatches / DP)", *M, run.global_microbatches));
  }
  if (*M * DP != run.global_microbatches) {
    a.bad("M", fmt::format("{} microbatches × data_parallel_size {} ≠ the batch's {} "
                           "microbatches",
                           *M, DP, run.global_microbatches));
  }
  run.training.num_microbatches = *M;
  return run;
}

void apply_variant_like(RecordRun& run, const config::VariantSpec& like) {
  const int64_t K = run.global_microbatches;
  if (like.data_parallel_size < 1 || K % like.data_parallel_size != 0) {
    throw InputError(
        fmt::format("--variant-like {}: dp = {} does not divide the record's {} "
                    "microbatches per step",
                    like.name, like.data_parallel_size, K));
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
      "global batch from the record",
      like.name, config::enum_name(like.implementation),
      like.layout.empty() ? "the even split" : "\"" + like.layout + "\"", like.pipeline_size,
      like.data_parallel_size, run.training.num_microbatches, config::enum_name(like.optimizer)));
}

}  // namespace mtp::replay
