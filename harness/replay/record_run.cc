#include "harness/replay/record_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "harness/common/error.h"
#include "harness/common/utf8.h"
#include "harness/config/hyperparameters.h"
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

/// A hyperparameter's value as an error shows it.
template <class T>
std::string shown_value(const T& x) {
  if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
    return fmt::format("[{}]", fmt::join(x, ","));
  } else {
    return fmt::format("{}", x);
  }
}

/// The model row whose record attribute is `attr` (a name of config/hyperparameters.h).
const config::Hyperparameter<config::ModelConfig>& model_row(const char* attr) {
  const auto* h = config::model_hyperparameter_by_attr(attr);
  MTP_INTERNAL_ASSERT(h != nullptr, fmt::format("no model hyperparameter records '{}'", attr));
  return *h;
}

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

  /// Hyperparameter `h`'s value in the record (config/hyperparameters.h): of the row's type (an
  /// integral number for an integer, 0/1 for a boolean, a "[a,b,…]" list) and within the row's
  /// rule; nullopt when absent. RecordError naming the attribute otherwise.
  template <class C>
  std::optional<config::HyperValue> hyper(const config::Hyperparameter<C>& h) const {
    const std::string key = h.record_attr;
    const auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    std::optional<config::HyperValue> v;
    if (h.type == config::HyperType::kInt) {
      v = *int_of(key);  // integral doubles too (Megatron's records)
    } else {
      v = config::from_recorded(h, it->second);
    }
    if (!v) {
      const char* what = h.type == config::HyperType::kDouble ? "a number"
                         : h.type == config::HyperType::kBool ? "0 or 1"
                         : h.type == config::HyperType::kEnum ? "a string"
                                                              : "a list \"[a,b,…]\" of numbers";
      const std::string shown = std::visit(
          [](const auto& x) {
            if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>) {
              return fmt::format("\"{}\"", printable(x));
            } else {
              return fmt::format("{}", x);
            }
          },
          it->second);
      bad(key, fmt::format("{} is not {}", shown, what));
    }
    if (const std::string why = h.rule(*v); !why.empty()) {
      if (h.type == config::HyperType::kEnum) {
        bad(key, fmt::format("\"{}\" {}", printable(std::get<std::string>(*v)), why));
      }
      bad(key,
          fmt::format("{} {}", std::visit([](const auto& x) { return shown_value(x); }, *v), why));
    }
    return v;
  }

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
    return fmt::format("{}: steps/{}/{}/{}", rec->path(), record::step_group_name(step),
                       record::group_name(record::Group::kWeight), printable(n));
  }
  std::vector<int64_t> shape(const std::string& n) const {
    return rec->describe(step, record::Group::kWeight, n).shape;
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
  record::DType dtype(const std::string& n) const {
    return rec->describe(step, record::Group::kWeight, n).dtype;
  }
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
  // Read as the table says; absent: required, or the default with a note saying so.
  const config::ModelConfig defaults;
  auto read = [&](const char* attr, const char* required_because, const char* default_note) {
    const auto& h = model_row(attr);
    if (auto v = a.hyper(h)) {
      h.set(c, *v);
    } else if (required_because != nullptr) {
      a.missing(attr, required_because);
    } else {
      h.set(c, h.get(defaults));
      if (default_note != nullptr) {
        notes.push_back(
            fmt::format("{}: {} ({})", attr,
                        std::visit([](const auto& x) { return shown_value(x); }, h.get(defaults)),
                        default_note));
      }
    }
  };
  if (a.has("untie_embeddings_and_output_weights")) {
    read("untie_embeddings_and_output_weights", nullptr, nullptr);
  } else {
    c.untie_embeddings = w.has(config::kOutputLayerName);
    notes.push_back(fmt::format(
        "untie_embeddings_and_output_weights: {} (the weights {} {})", c.untie_embeddings ? 1 : 0,
        c.untie_embeddings ? "hold" : "do not hold", config::kOutputLayerName));
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
  // Every other hyperparameter of the table as the record says; absent: required where the
  // record cannot be replayed without it, else the default (a note names the well-known ones).
  const std::set<std::string> read_above{
      "num_layers",          "hidden_size",      "ffn_hidden_size",
      "num_attention_heads", "num_query_groups", "kv_channels",
      "vocab_size",          "seq_length",       "micro_batch_size",
      "mtp_num_layers",      "num_moe_experts",  "untie_embeddings_and_output_weights"};
  const char* moe = "MoE models record it";
  const std::map<std::string, const char*> required{
      {"mtp_loss_scaling_factor", c.mtp_num_layers > 0 ? "λ scales every MTP gradient" : nullptr},
      {"moe_router_topk", moe},
      {"moe_ffn_hidden_size", moe}};
  const std::map<std::string, const char*> default_notes{
      {"rotary_base", "Megatron-LM's default"},
      {"norm_epsilon", "Megatron-LM's default"},
      {"kernels", "LibTorch ops, the harness's default"},
      {"attention_backend", "the unfused composite, the harness's default"}};
  for (const auto& h : config::model_hyperparameters()) {
    if (h.record_attr == nullptr || read_above.count(h.record_attr)) continue;
    if (h.moe_only && c.num_moe_experts == 0) continue;
    if (!h.set) {
      a.hyper(h);  // a fixed value (the sigmoid router): refused when the record says otherwise
      continue;
    }
    const auto req = required.find(h.record_attr);
    const auto note = default_notes.find(h.record_attr);
    read(h.record_attr, req == required.end() ? nullptr : req->second,
         note == default_notes.end() ? nullptr : note->second);
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
  // Adam's settings and clipping, typed and checked as a scenario's (config/hyperparameters.h):
  // a record that says clip_grad = NaN, inf or −1 is refused, not read as "clipping off".
  for (const char* key :
       {"lr", "adam_beta1", "adam_beta2", "adam_eps", "weight_decay", "clip_grad"}) {
    const auto* h = config::training_hyperparameter_by_attr(key);
    MTP_INTERNAL_ASSERT(h != nullptr, fmt::format("no training hyperparameter records '{}'", key));
    if (auto v = a.hyper(*h)) {
      h->set(t, *v);
    } else if (optimizer_matters) {
      a.missing(key, "the replay compares results of an optimizer step");
    } else {
      defaulted.push_back(fmt::format("{} = {}", key, std::get<double>(h->get(t))));
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
  if (impl == "reference" || impl == "candidate" || impl == "split") {
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
    const layout::PipelineLayout l = layout::build_layout(
        text, v.pipeline_size, static_cast<int>(model.num_layers),
        static_cast<int>(model.mtp_num_layers), config::mtp_rule(v.implementation));
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
  // Written only when > 1 (engine/step_recorder.cc): absent means 1.
  v.context_parallel_size =
      static_cast<int>(a.int_in("context_parallel_size", 1, kMaxDataParallelSize).value_or(1));
  v.expert_parallel_size =
      static_cast<int>(a.int_in("expert_model_parallel_size", 1, kMaxDataParallelSize).value_or(1));
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
  if (auto acc = a.string_of("accumulation")) {
    try {
      v.accumulation = config::parse_enum<config::Accumulation>(*acc);
    } catch (const InputError& err) {
      a.bad("accumulation", err.what());
    }
  }
  // A planted bug (config/fault.h): replay plants it again, so the replay reproduces the record.
  if (auto f = a.string_of("inject")) {
    try {
      v.inject = config::parse_enum<config::Fault>(*f);
    } catch (const InputError& err) {
      a.bad("inject", err.what());
    }
  }
  return v;
}

}  // namespace

RecordRun read_record_run(const record::RecordReader& rec, const ReplaySteps& steps,
                          bool optimizer_matters) {
  const Attrs a(rec);
  const int start = steps.first - 1;
  const std::vector<int> present = rec.steps();
  auto has_group = [&](int step, record::Group group) {
    return std::binary_search(present.begin(), present.end(), step) && rec.has_group(step, group);
  };
  if (!has_group(start, record::Group::kWeight)) {
    throw RecordError(
        fmt::format("{}: has no weights at step {} (replaying from step {} starts "
                    "from them)",
                    rec.path(), start, steps.first));
  }
  if (!has_group(steps.first, record::Group::kBatch)) {
    throw RecordError(fmt::format("{}: has no batch at step {}", rec.path(), steps.first));
  }
  Weights w;
  w.rec = &rec;
  w.step = start;
  w.names = rec.names(start, record::Group::kWeight);
  const std::vector<int64_t> batch =
      rec.describe(steps.first, record::Group::kBatch, record::kBatchTensorNames[0]).shape;
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
  if (run.variant.inject) {
    run.notes.push_back(fmt::format("inject: the record was made with the planted bug \"{}\" ({})",
                                    config::enum_name(*run.variant.inject),
                                    config::fault_info(*run.variant.inject).what));
  }
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
  if (run.variant.context_parallel_size != like.context_parallel_size) {
    run.notes.push_back(fmt::format(
        "--variant-like {}: cp = {} (the record: cp = {}); each rank then sums its own tokens' "
        "gradient terms, so expect the grads to differ in their last bits",
        like.name, like.context_parallel_size, run.variant.context_parallel_size));
  }
  if (run.variant.expert_parallel_size != like.expert_parallel_size) {
    run.notes.push_back(fmt::format(
        "--variant-like {}: ep = {} (the record: ep = {}); each expert's grad then sums another "
        "grouping of the ranks' tokens (one GEMM over the tokens its EP rank receives, then the "
        "expert-data-parallel sum), and every grad upstream of an MoE layer follows, so expect "
        "the grads to differ in their last bits (and step 1's losses where an expert's GEMM is "
        "not row-invariant): judge with --class rel_l2:B (scenarios/cp_ep.toml holds "
        "rel_l2:1e-10 in float64)",
        like.name, like.expert_parallel_size, run.variant.expert_parallel_size));
  }
  if (run.variant.inject != like.inject) {
    run.notes.push_back(fmt::format(
        "--variant-like {}: planted bug {} (the record: {}), so the replay cannot be equal where "
        "the bug reaches",
        like.name, like.inject ? config::enum_name(*like.inject) : "none",
        run.variant.inject ? config::enum_name(*run.variant.inject) : "none"));
  }
  v.clip_grad.reset();
  config::clear_model_overrides(v);  // the record's model (D, λ, kernels, attention, …)
  v.resume_of.clear();               // the replay's own start applies
  v.resume_step = 0;
  run.variant = v;
  run.training.num_microbatches = K / like.data_parallel_size;
  run.notes.push_back(fmt::format(
      "--variant-like {}: {} {} (P = {}, DP = {}{}{}, M = {}, {}); model, hyperparameters and "
      "the global batch from the record",
      like.name, config::enum_name(like.implementation),
      like.layout.empty() ? "the even split" : "\"" + like.layout + "\"", like.pipeline_size,
      like.data_parallel_size,
      like.context_parallel_size > 1 ? fmt::format(", CP = {}", like.context_parallel_size) : "",
      like.expert_parallel_size > 1 ? fmt::format(", EP = {}", like.expert_parallel_size) : "",
      run.training.num_microbatches, config::enum_name(like.optimizer)));
}

}  // namespace mtp::replay
