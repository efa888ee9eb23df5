#include "harness/scenario/scenario.h"

#include <fmt/format.h>

#include <sys/stat.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "harness/common/error.h"
#include "harness/common/glob.h"
#include "harness/common/utf8.h"
#include "harness/config/hyperparameters.h"
#include "harness/config/param_specs.h"
#include "harness/data/microbatch.h"
#include "harness/layout/layout.h"
#include "harness/schedule/schedule.h"
#include "harness/sim/costs.h"
#include "harness/sim/presets.h"
#include "harness/sim/simulate.h"

namespace mtp::scenario {
namespace {

/// Error helper bound to the scenario's source name.
class Ctx {
 public:
  explicit Ctx(std::string source) : source_(std::move(source)) {}
  [[noreturn]] void fail(const toml::node* node, const std::string& what) const {
    fail_at(node != nullptr ? node->source() : toml::source_region{}, what);
  }
  /// `what` at `where`; a missing table or key (no region) is reported at the file's start.
  [[noreturn]] void fail_at(const toml::source_region& where, const std::string& what) const {
    throw InputError(fmt::format("{}: {}", at(where), what));
  }
  /// "<source>:<line>:<column>" of `where` (1:1 when it has no position).
  std::string at(const toml::source_region& where) const {
    if (where.begin) return fmt::format("{}:{}:{}", source_, where.begin.line, where.begin.column);
    return fmt::format("{}:1:1", source_);
  }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

/// Rejects keys of `table` that are not in `known`.
void check_keys(const Ctx& ctx, const toml::table& table, const std::string& where,
                const std::set<std::string>& known) {
  for (const auto& [key, node] : table) {
    if (!known.count(std::string(key.str()))) {
      std::vector<std::string> k(known.begin(), known.end());
      ctx.fail_at(key.source(), fmt::format("{}: unknown key '{}' (known keys: {})", where,
                                            key.str(), fmt::join(k, ", ")));
    }
  }
}

int64_t get_int(const Ctx& ctx, const toml::table& t, const char* key, const std::string& where,
                int64_t fallback, int64_t min_value) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  if (!n->is_integer()) ctx.fail(n, fmt::format("{}.{} must be an integer", where, key));
  const int64_t v = n->value<int64_t>().value();
  if (v < min_value) ctx.fail(n, fmt::format("{}.{} = {} must be >= {}", where, key, v, min_value));
  return v;
}

/// An integer key narrowed to int: checked against [min_value, max_value] before narrowing, so a
/// value past 2^31 is an error at its position, never a wrapped number.
int get_int_in(const Ctx& ctx, const toml::table& t, const char* key, const std::string& where,
               int fallback, int min_value, int max_value) {
  const int64_t v = get_int(ctx, t, key, where, fallback, min_value);
  if (v > max_value) {
    ctx.fail(t.get(key), fmt::format("{}.{} = {} must be <= {}", where, key, v, max_value));
  }
  return static_cast<int>(v);
}

double get_double(const Ctx& ctx, const toml::table& t, const char* key, const std::string& where,
                  double fallback) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  if (!n->is_number()) ctx.fail(n, fmt::format("{}.{} must be a number", where, key));
  const double v = n->value<double>().value();
  if (!std::isfinite(v)) ctx.fail(n, fmt::format("{}.{} must be finite", where, key));
  return v;
}

bool get_bool(const Ctx& ctx, const toml::table& t, const char* key, const std::string& where,
              bool fallback) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  if (!n->is_boolean()) ctx.fail(n, fmt::format("{}.{} must be true or false", where, key));
  return n->value<bool>().value();
}

std::string get_string(const Ctx& ctx, const toml::table& t, const char* key,
                       const std::string& where, const std::string& fallback) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  if (!n->is_string()) ctx.fail(n, fmt::format("{}.{} must be a string", where, key));
  return n->value<std::string>().value();
}

std::vector<std::string> get_strings(const Ctx& ctx, const toml::table& t, const char* key,
                                     const std::string& where, std::vector<std::string> fallback) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  const toml::array* a = n->as_array();
  if (a == nullptr) ctx.fail(n, fmt::format("{}.{} must be an array of strings", where, key));
  std::vector<std::string> out;
  for (const auto& e : *a) {
    if (!e.is_string()) ctx.fail(&e, fmt::format("{}.{} must hold only strings", where, key));
    out.push_back(e.value<std::string>().value());
  }
  return out;
}

/// An enum-like value spelled as config/enums.h names it; the error quotes the accepted names.
template <class E>
E get_enum(const Ctx& ctx, const toml::table& t, const char* key, const std::string& where,
           E fallback) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  if (!n->is_string()) ctx.fail(n, fmt::format("{}.{} must be a string", where, key));
  try {
    return config::parse_enum<E>(n->value<std::string>().value(), fmt::format("{}.{}", where, key));
  } catch (const InputError& e) {
    ctx.fail(n, e.what());
  }
}

const toml::table* get_table(const Ctx& ctx, const toml::table& root, const char* key) {
  const toml::node* n = root.get(key);
  if (n == nullptr) return nullptr;
  if (!n->is_table()) ctx.fail(n, fmt::format("[{}] must be a table", key));
  return n->as_table();
}

/// Names become file and directory names (runs/<scenario>/<variant>.h5, <name>.txt goldens):
/// at most this many bytes, so each, with ".h5" and a temporary's suffix, fits in 255.
constexpr size_t kMaxNameBytes = 200;

/// A name as errors quote it: the first 60 bytes of a longer one, then "…".
std::string shown_name(const std::string& s) { return s.size() > 60 ? s.substr(0, 60) + "…" : s; }

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > kMaxNameBytes) return false;
  if (s.find_first_not_of('.') == std::string::npos) return false;  // ".", "..": not a file name
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      return false;
  }
  return true;
}

/// The value of hyperparameter `h` at node `n` ([model] / [training] of a scenario), of the
/// row's type: the error names the key's position and the rule broken.
template <class C>
config::HyperValue hyper_value(const Ctx& ctx, const toml::node* n, const std::string& w,
                               const config::Hyperparameter<C>& h) {
  const std::string key = fmt::format("{}.{}", w, h.key);
  auto list = [&](bool integers) {
    const toml::array* a = n->as_array();
    const char* what = integers ? "integers" : "numbers";
    if (a == nullptr) ctx.fail(n, fmt::format("{} must be an array of {}", key, what));
    std::vector<int64_t> ints;
    std::vector<double> numbers;
    for (const auto& e : *a) {
      if (integers ? !e.is_integer() : !e.is_number()) {
        ctx.fail(&e, fmt::format("{} must hold only {}", key, what));
      }
      if (integers) ints.push_back(e.value<int64_t>().value());
      if (!integers) numbers.push_back(e.value<double>().value());
    }
    return integers ? config::HyperValue(ints) : config::HyperValue(numbers);
  };
  config::HyperValue v;
  switch (h.type) {
    case config::HyperType::kInt:
      if (!n->is_integer()) ctx.fail(n, fmt::format("{} must be an integer", key));
      v = n->value<int64_t>().value();
      break;
    case config::HyperType::kDouble:
      if (!n->is_number()) ctx.fail(n, fmt::format("{} must be a number", key));
      v = n->value<double>().value();
      break;
    case config::HyperType::kBool:
      if (!n->is_boolean()) ctx.fail(n, fmt::format("{} must be true or false", key));
      v = n->value<bool>().value();
      break;
    case config::HyperType::kEnum: {
      if (!n->is_string()) ctx.fail(n, fmt::format("{} must be a string", key));
      const std::string text = n->value<std::string>().value();
      if (std::find(h.choices.begin(), h.choices.end(), text) == h.choices.end()) {
        std::vector<std::string> quoted;
        for (const auto& c : h.choices) quoted.push_back(fmt::format("\"{}\"", c));
        ctx.fail(n, fmt::format("{} = {:?}: accepted {}", key, text, fmt::join(quoted, ", ")));
      }
      v = text;
      break;
    }
    case config::HyperType::kIntList:
      v = list(true);
      break;
    case config::HyperType::kDoubleList:
      v = list(false);
      break;
  }
  const std::string why = h.rule(v);
  if (!why.empty()) {
    const std::string shown = std::visit(
        [](const auto& x) -> std::string {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, std::vector<int64_t>> ||
                        std::is_same_v<X, std::vector<double>>) {
            return fmt::format("[{}]", fmt::join(x, ", "));
          } else {
            return fmt::format("{}", x);
          }
        },
        v);
    ctx.fail(n, fmt::format("{} = {} {}", key, shown, why));
  }
  return v;
}

/// The keys of `rows` a scenario may set, plus `extra`.
template <class C>
std::set<std::string> hyper_keys(const std::vector<config::Hyperparameter<C>>& rows,
                                 std::initializer_list<const char*> extra) {
  std::set<std::string> keys(extra.begin(), extra.end());
  for (const auto& h : rows) {
    if (h.key != nullptr && h.set) keys.insert(h.key);
  }
  return keys;
}

/// Sets every hyperparameter of `rows` that table `t` gives on `cfg`, in the table's order.
template <class C>
void parse_hyperparameters(const Ctx& ctx, const toml::table& t, const std::string& w,
                           const std::vector<config::Hyperparameter<C>>& rows, C& cfg) {
  for (const auto& h : rows) {
    if (h.key == nullptr || !h.set) continue;
    if (const toml::node* n = t.get(h.key)) h.set(cfg, hyper_value(ctx, n, w, h));
  }
}

void parse_model(const Ctx& ctx, const toml::table& t, config::ModelConfig& m) {
  const std::string w = "[model]";
  check_keys(ctx, t, w, hyper_keys(config::model_hyperparameters(), {}));
  parse_hyperparameters(ctx, t, w, config::model_hyperparameters(), m);
  // num_query_groups defaults to the heads: plain multi-head attention (Megatron-LM).
  if (t.get("num_query_groups") == nullptr) m.num_query_groups = m.num_attention_heads;
  try {
    m.validate();
  } catch (const InputError& e) {
    ctx.fail(&t, e.what());
  }
}

void parse_training(const Ctx& ctx, const toml::table& t, config::TrainingConfig& tr) {
  const std::string w = "[training]";
  check_keys(ctx, t, w,
             hyper_keys(config::training_hyperparameters(),
                        {"global_batch_size", "init_from", "dump_steps"}));
  parse_hyperparameters(ctx, t, w, config::training_hyperparameters(), tr);
  if (const toml::node* n = t.get("global_batch_size")) {
    if (t.get("num_microbatches")) {
      ctx.fail(n,
               "[training]: give num_microbatches (M per data-parallel rank) or "
               "global_batch_size (samples per step), not both");
    }
    tr.global_batch_size = get_int(ctx, t, "global_batch_size", w, 0, 1);
    if (*tr.global_batch_size > 10000000) {
      ctx.fail(n, "[training].global_batch_size must be <= 10000000");
    }
  }
  if (const toml::node* n = t.get("init_from")) {
    try {
      tr.init_from = config::parse_record_ref(get_string(ctx, t, "init_from", w, ""), 0);
    } catch (const InputError& e) {
      ctx.fail(n, fmt::format("[training].init_from = {}", e.what()));
    }
  }
  if (const toml::node* n = t.get("dump_steps")) {
    const toml::array* a = n->as_array();
    if (a == nullptr) ctx.fail(n, "[training].dump_steps must be an array of step numbers");
    for (const auto& e : *a) {
      const std::optional<int64_t> step = e.value<int64_t>();
      if (!e.is_integer() || !step || *step < 0 || *step > tr.steps) {
        ctx.fail(&e, fmt::format("[training].dump_steps: each entry must be a step in [0, {}] "
                                 "(0 = the initial weights)",
                                 tr.steps));
      }
      tr.dump_steps.insert(*step);
    }
  }
}

void parse_data(const Ctx& ctx, const toml::table& t, data::DataConfig& d, int64_t vocab_size) {
  const std::string w = "[data]";
  check_keys(ctx, t, w,
             {"kind", "path", "path_prefix", "mask_token", "eod_token", "eod_mask_loss",
              "edge_batches", "mask_fractions"});
  d.kind = get_string(ctx, t, "kind", w, d.kind);
  d.path = get_string(ctx, t, "path", w, d.path);
  d.path_prefix = get_string(ctx, t, "path_prefix", w, d.path_prefix);
  d.mask_token = get_int(ctx, t, "mask_token", w, d.mask_token, -1);
  d.eod_token = get_int(ctx, t, "eod_token", w, d.eod_token, 0);
  d.eod_mask_loss = get_bool(ctx, t, "eod_mask_loss", w, d.eod_mask_loss);
  d.edge_batches = get_strings(ctx, t, "edge_batches", w, d.edge_batches);
  if (const toml::node* n = t.get("mask_fractions")) {
    const toml::array* a = n->as_array();
    if (a == nullptr || a->empty() || a->size() > 100000) {
      ctx.fail(n, "[data].mask_fractions must be an array of 1 to 100000 numbers in [0, 1]");
    }
    d.mask_fractions.clear();
    for (const auto& e : *a) {
      const std::optional<double> f = e.is_number() ? e.value<double>() : std::nullopt;
      if (!f || !(*f >= 0.0 && *f <= 1.0)) {
        ctx.fail(&e,
                 "[data].mask_fractions entries must be numbers in [0, 1] (the fraction of a "
                 "microbatch's valid labels to mask)");
      }
      d.mask_fractions.push_back(*f);
    }
  }
  if (d.kind != "text" && d.kind != "megatron") {
    ctx.fail(t.get("kind"),
             fmt::format("[data].kind = \"{}\": accepted \"text\", \"megatron\"", d.kind));
  }
  if (d.kind == "megatron" && t.get("path")) {
    ctx.fail(t.get("path"),
             "[data].path is for kind \"text\"; a Megatron dataset is named by path_prefix");
  }
  if (d.kind == "text" && t.get("path_prefix")) {
    ctx.fail(t.get("path_prefix"),
             "[data].path_prefix is for kind \"megatron\" (PREFIX.idx, PREFIX.bin)");
  }
  if (d.kind == "megatron" && d.path_prefix.empty()) {
    ctx.fail(t.get("path_prefix") ? t.get("path_prefix") : &t,
             "[data] kind \"megatron\" needs path_prefix (PREFIX of PREFIX.idx and PREFIX.bin)");
  }
  for (const auto& [key, id] :
       {std::pair{"mask_token", d.mask_token}, std::pair{"eod_token", d.eod_token}}) {
    if (id >= vocab_size) {
      ctx.fail(t.get(key), fmt::format("[data].{} = {} is not a token id (vocab_size = {})", key,
                                       id, vocab_size));
    }
  }
  if (d.edge_batches.size() > 100000) {
    ctx.fail(t.get("edge_batches"), "[data].edge_batches must have at most 100000 entries");
  }
  if (const toml::array* a = t.get("edge_batches") ? t.get("edge_batches")->as_array() : nullptr) {
    for (const auto& e : *a) {
      try {
        data::parse_edge_batch(e.value<std::string>().value());
      } catch (const InputError& err) {
        ctx.fail(&e, fmt::format("[data].edge_batches: {}", err.what()));
      }
    }
  }
}

/// Opens the corpus [data] names and checks it against the model (a sequence of seq_length + 1
/// tokens, the vocabulary): errors point at [data].path or [data].path_prefix (or the [data]
/// table, or the file's start when the default corpus is at fault).
void check_data(const Ctx& ctx, const toml::table& root, const Scenario& sc) {
  try {
    auto source = data::open_token_source(sc.data);
    data::MicrobatchBuilder(*source, sc.data, sc.model.micro_batch_size, sc.model.seq_length,
                            sc.model.vocab_size);
  } catch (const InputError& e) {
    const toml::table* t = root.get("data") != nullptr ? root.get("data")->as_table() : nullptr;
    if (t == nullptr) {
      ctx.fail(nullptr, fmt::format("[data] (not given: the default corpus \"{}\"): {}",
                                    sc.data.path, e.what()));
    }
    const bool megatron = sc.data.kind == "megatron";
    const char* key = megatron ? "path_prefix" : "path";
    const std::string& value = megatron ? sc.data.path_prefix : sc.data.path;
    const toml::node* at = t->get(key) != nullptr ? t->get(key) : t;
    ctx.fail(at, fmt::format("[data].{} = \"{}\": {}", key, printable(value), e.what()));
  }
}

/// Records where every table and key was written (Scenario::positions): tables by name, the
/// [[variant]] and [[expectation]] tables by their `name`, keys at their values.
void record_positions(const Ctx& ctx, const toml::table& root, Scenario& sc) {
  auto put_table = [&](const std::string& base, const toml::node& table) {
    sc.positions[base] = ctx.at(table.source());
    for (const auto& [key, node] : *table.as_table()) {
      sc.positions[base + "." + std::string(key.str())] = ctx.at(node.source());
    }
  };
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (node.is_table()) put_table(name, node);
    if (!node.is_array_of_tables()) continue;
    for (const auto& element : *node.as_array()) {
      if (auto id = element.as_table()->get_as<std::string>("name")) {
        put_table(name + "." + id->get(), element);
      }
    }
  }
}

config::VariantSpec parse_variant(const Ctx& ctx, const toml::table& t, size_t index) {
  config::VariantSpec v;
  std::string w = fmt::format("[[variant]] #{}", index + 1);
  if (const auto* n = t.get("name"); n && n->is_string()) {
    w = fmt::format("variant \"{}\"", shown_name(n->value<std::string>().value()));
  }
  check_keys(ctx, t, w,
             {"name",
              "implementation",
              "layout",
              "pp",
              "vpp",
              "dp",
              "cp",
              "ep",
              "schedule",
              "microbatch_group_size",
              "clip_grad",
              "mtp_loss_scaling_factor",
              "mtp_num_layers",
              "transport_max_delay_us",
              "overlap_p2p",
              "cuda_graphs",
              "kernels",
              "attention_backend",
              "untie_embeddings",
              "calculate_per_token_loss",
              "optimizer",
              "embedding_copy_update",
              "ddp_bucket_size",
              "record",
              "inject",
              "accumulation",
              "resume",
              "why"});
  v.name = get_string(ctx, t, "name", w, "");
  if (!valid_name(v.name)) {
    ctx.fail(t.get("name") ? t.get("name") : &t,
             fmt::format("{}: name \"{}\" must be non-empty, at most {} bytes (it names the record "
                         "file), not only dots, and use only letters, digits, '_', '-', '.'",
                         w, shown_name(v.name), kMaxNameBytes));
  }
  w = fmt::format("variant \"{}\"", v.name);
  if (const toml::node* n = t.get("resume")) {
    // A resumed variant runs as its source: only its name (and why) are its own.
    for (const auto& [key, value] : t) {
      if (key.str() != "name" && key.str() != "resume" && key.str() != "why") {
        ctx.fail(&value, fmt::format("{}: a resumed variant runs with the settings of the variant "
                                     "it resumes; remove {}",
                                     w, key.str()));
      }
    }
    const std::string text = get_string(ctx, t, "resume", w, "");
    const size_t colon = text.rfind(':');
    int64_t step = -1;
    if (colon != std::string::npos && colon + 1 < text.size() && colon + 8 > text.size() &&
        text.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
      step = std::stoll(text.substr(colon + 1));
    }
    if (colon == std::string::npos || colon == 0 || step < 0) {
      ctx.fail(n, fmt::format("{}: resume = \"{}\" must be \"VARIANT:STEP\" (an earlier variant "
                              "and the step of its record to continue from)",
                              w, text));
    }
    v.resume_of = text.substr(0, colon);
    v.resume_step = step;
    get_string(ctx, t, "why", w, "");
    return v;
  }
  if (t.get("implementation") == nullptr) {
    ctx.fail(&t, fmt::format("{}: implementation is required ({})", w,
                             config::accepted_names<config::Implementation>()));
  }
  v.implementation = get_enum<config::Implementation>(ctx, t, "implementation", w,
                                                      config::Implementation::kReference);
  v.layout = get_string(ctx, t, "layout", w, "");
  if (t.get("layout") && v.layout.empty()) {
    ctx.fail(t.get("layout"),
             fmt::format("{}: layout is empty; omit the key for Megatron's even split", w));
  }
  v.pipeline_size = get_int_in(ctx, t, "pp", w, 1, 1, 64);
  v.virtual_size = get_int_in(ctx, t, "vpp", w, 1, 1, 4096);
  v.data_parallel_size = get_int_in(ctx, t, "dp", w, 1, 1, 64);
  v.context_parallel_size = get_int_in(ctx, t, "cp", w, 1, 1, 64);
  v.expert_parallel_size = get_int_in(ctx, t, "ep", w, 1, 1, 64);
  if (v.pipeline_size * v.data_parallel_size * v.context_parallel_size > 256) {
    ctx.fail(t.get("cp") ? t.get("cp") : t.get("dp"),
             fmt::format("{}: pp · dp · cp = {} ranks; at most 256", w,
                         v.pipeline_size * v.data_parallel_size * v.context_parallel_size));
  }
  if (v.virtual_size > 64) ctx.fail(t.get("vpp"), fmt::format("{}: vpp must be <= 64", w));
  if (!v.layout.empty() && t.get("vpp")) {
    ctx.fail(t.get("vpp"),
             fmt::format("{}: vpp is derived from the layout; give one or the other", w));
  }
  if (const toml::node* n = t.get("schedule")) {
    const std::string name = get_string(ctx, t, "schedule", w, "");
    if (name.empty()) {
      ctx.fail(
          n, fmt::format("{}: schedule is empty; omit the key to derive it from pp and the layout",
                         w));
    }
    try {
      v.schedule = schedule::parse_schedule_kind(name);
    } catch (const InputError& e) {
      ctx.fail(n, fmt::format("{}: {}", w, e.what()));
    }
  }
  v.microbatch_group_size = get_int_in(ctx, t, "microbatch_group_size", w, 0, 1, 100000);
  if (t.get("clip_grad")) {
    v.clip_grad = get_double(ctx, t, "clip_grad", w, 0.0);
    if (*v.clip_grad < 0)
      ctx.fail(t.get("clip_grad"), fmt::format("{}: clip_grad must be >= 0", w));
  }
  if (t.get("mtp_loss_scaling_factor")) {
    v.mtp_loss_scaling_factor = get_double(ctx, t, "mtp_loss_scaling_factor", w, 0.0);
  }
  if (t.get("mtp_num_layers")) v.mtp_num_layers = get_int_in(ctx, t, "mtp_num_layers", w, 0, 0, 64);
  v.transport_max_delay_us = get_int(ctx, t, "transport_max_delay_us", w, 0, 0);
  if (v.transport_max_delay_us > 1000000) {
    ctx.fail(t.get("transport_max_delay_us"),
             fmt::format("{}: transport_max_delay_us must be <= 1000000", w));
  }
  v.overlap_p2p = get_bool(ctx, t, "overlap_p2p", w, false);
  v.cuda_graphs = get_bool(ctx, t, "cuda_graphs", w, false);
  if (t.get("kernels")) {
    v.kernels = get_enum<config::Kernels>(ctx, t, "kernels", w, config::Kernels::kTorch);
  }
  if (t.get("attention_backend")) {
    v.attention_backend = get_enum<config::AttentionBackend>(ctx, t, "attention_backend", w,
                                                             config::AttentionBackend::kUnfused);
  }
  if (t.get("untie_embeddings")) v.untie_embeddings = get_bool(ctx, t, "untie_embeddings", w, true);
  if (t.get("calculate_per_token_loss")) {
    v.calculate_per_token_loss = get_bool(ctx, t, "calculate_per_token_loss", w, false);
  }
  v.optimizer = get_enum<config::Optimizer>(ctx, t, "optimizer", w, v.optimizer);
  v.embedding_copy_update = get_enum<config::EmbeddingCopyUpdate>(ctx, t, "embedding_copy_update",
                                                                  w, v.embedding_copy_update);
  v.ddp_bucket_size = get_int(ctx, t, "ddp_bucket_size", w, 0, 0);
  if (t.get("record")) {
    v.record = get_enum<config::RecordMode>(ctx, t, "record", w, config::RecordMode::kAuto);
  }
  if (t.get("inject")) {
    v.inject = get_enum<config::Fault>(ctx, t, "inject", w, config::Fault::kNone);
    if (v.inject == config::Fault::kNone) v.inject.reset();  // "none": no planted bug
  }
  if (t.get("accumulation")) {
    v.accumulation =
        get_enum<config::Accumulation>(ctx, t, "accumulation", w, config::Accumulation::kMegatron);
  }
  get_string(ctx, t, "why", w, "");
  return v;
}

/// Checks the variant's layout string against the model (harness/layout rules R1–R10), so a bad
/// layout is reported at its key.
void check_variant_layout(const Ctx& ctx, const toml::table& t, const config::VariantSpec& v,
                          const config::ModelConfig& model) {
  try {
    if (v.layout.empty()) {
      layout::default_layout(v.pipeline_size, v.virtual_size, static_cast<int>(model.num_layers),
                             static_cast<int>(model.mtp_num_layers));
    } else {
      layout::build_layout(v.layout, v.pipeline_size, static_cast<int>(model.num_layers),
                           static_cast<int>(model.mtp_num_layers),
                           config::mtp_rule(v.implementation));
    }
  } catch (const InputError& e) {
    const toml::node* at = t.get("layout") ? t.get("layout") : (t.get("pp") ? t.get("pp") : &t);
    ctx.fail(at, fmt::format("variant \"{}\": {}", v.name, e.what()));
  }
}

std::set<int> parse_steps(const Ctx& ctx, const toml::node* n, const std::string& w,
                          int64_t steps) {
  std::set<int> out;
  if (n == nullptr) return out;  // all
  auto check = [&](int64_t s, const toml::node* at) {
    if (s < 0 || s > steps) {
      ctx.fail(at, fmt::format("{}: step {} is outside 0..{} (0 = initial weights)", w, s, steps));
    }
    return static_cast<int>(s);
  };
  if (const toml::array* a = n->as_array()) {
    for (const auto& e : *a) {
      if (!e.is_integer()) ctx.fail(&e, fmt::format("{}: steps must hold integers", w));
      out.insert(check(e.value<int64_t>().value(), &e));
    }
    if (out.empty()) ctx.fail(n, fmt::format("{}: steps must not be empty", w));
    return out;
  }
  if (!n->is_string())
    ctx.fail(n,
             fmt::format("{}: steps must be \"all\", \"A-B\", \"A-\" or an array of integers", w));
  try {
    return parse_step_spec(n->value<std::string>().value(), static_cast<int>(steps));
  } catch (const InputError& e) {
    ctx.fail(n, fmt::format("{}: {}", w, e.what()));
  }
}

namespace {

/// `v` (name, resume_of, resume_step) as the variant it resumes, which must be an earlier,
/// not itself resumed, variant of `sc`; the step must be a training step before the last, and
/// the scenario must save the optimizer state (the resumed run needs it).
config::VariantSpec resumed_variant(const Ctx& ctx, const toml::table& t,
                                    const config::VariantSpec& v, const Scenario& sc) {
  const toml::node* at = t.get("resume");
  const std::string w = fmt::format("variant \"{}\"", v.name);
  const auto src = std::find_if(sc.variants.begin(), sc.variants.end(),
                                [&](const auto& x) { return x.name == v.resume_of; });
  if (src == sc.variants.end()) {
    ctx.fail(at, fmt::format("{}: resume names \"{}\", which is not a variant defined before it", w,
                             shown_name(v.resume_of)));
  }
  if (!src->resume_of.empty()) {
    ctx.fail(at, fmt::format("{}: resume names \"{}\", itself a resumed variant; resume its "
                             "source \"{}\" instead",
                             w, src->name, src->resume_of));
  }
  if (v.resume_step < 1 || v.resume_step >= sc.training.steps) {
    ctx.fail(at, fmt::format("{}: resume step {} must be a training step before the last (1 .. {})",
                             w, v.resume_step, sc.training.steps - 1));
  }
  if (!sc.training.save_optimizer_state) {
    ctx.fail(at, fmt::format("{}: resuming needs the optimizer state of \"{}\"'s record: set "
                             "[training] save_optimizer_state = true in the scenario "
                             "(--save-optimizer-state applies after the scenario is read)",
                             w, src->name));
  }
  if (sc.training.resume_from) {
    ctx.fail(at, fmt::format("{}: the scenario's runs already resume ([training] resume_from); a "
                             "resumed variant cannot be added",
                             w));
  }
  config::VariantSpec out = *src;
  out.name = v.name;
  out.resume_of = v.resume_of;
  out.resume_step = v.resume_step;
  return out;
}

}  // namespace

namespace {

/// A "faster" claim that can be simulated: its preset exists, each layout holds for the model and
/// P, the schedule for its P, V and M, and the costs file reads. Fails at the key.
void check_simulated_claim(const Ctx& ctx, const toml::table& t, const Expectation& e,
                           const config::ModelConfig& scenario_model) {
  const SimulatedClaim& c = *e.simulated;
  const std::string w = fmt::format("expectation \"{}\"", e.name);
  config::ModelConfig m = scenario_model;
  if (!c.preset.empty()) {
    try {
      m = sim::preset_model(c.preset);
    } catch (const InputError& err) {
      ctx.fail(t.get("preset"), fmt::format("{}: {}", w, err.what()));
    }
  }
  if (const std::string why = config::context_parallel_misfit(m, c.cp); !why.empty()) {
    ctx.fail(t.get("cp"), fmt::format("{}: cp = {} {}", w, c.cp, why));
  }
  if (const std::string why = config::expert_parallel_misfit(m, c.ep); !why.empty()) {
    ctx.fail(t.get("ep"), fmt::format("{}: ep = {} {}", w, c.ep, why));
  }
  for (const std::string& text : c.layouts) {
    try {
      sim::plan_simulation(m, text, c.pipeline_size, c.num_microbatches, c.schedule, 0, c.split);
    } catch (const InputError& err) {
      ctx.fail(t.get("layouts"), fmt::format("{}: {}", w, err.what()));
    }
  }
  try {
    sim::check_costs_fit(sim::read_costs(c.costs), m);
  } catch (const InputError& err) {
    ctx.fail(t.get("costs"), fmt::format("{}: {}", w, err.what()));
  }
}

/// The rest of a class "faster:X" expectation (`e` has its name): layouts, pp, microbatches,
/// schedule, costs, preset, split and why; no variants, records, steps or divergence keys. The
/// layouts must hold for the model and P, the costs file must be readable.
Expectation parse_faster(const Ctx& ctx, const toml::table& t, const std::string& w, Expectation e,
                         const std::string& cls) {
  for (const char* key : {"variants", "records", "include", "exclude", "steps", "first_divergence",
                          "first_divergence_step", "allow_nonfinite", "detects"}) {
    if (t.get(key)) {
      ctx.fail(t.get(key), fmt::format("{}: class \"faster\" simulates layouts without training; "
                                       "remove {}",
                                       w, key));
    }
  }
  SimulatedClaim c;
  const std::string bound = cls.substr(7);
  char* end = nullptr;
  c.at_most = std::strtod(bound.c_str(), &end);
  if (bound.empty() || *end != '\0' || !std::isfinite(c.at_most) || !(c.at_most > 0.0)) {
    ctx.fail(t.get("class"), fmt::format("{}: class \"{}\": faster:X needs a finite X > 0 (the "
                                         "largest ratio of the second layout's simulated step to "
                                         "the first's)",
                                         w, cls));
  }
  c.layouts = get_strings(ctx, t, "layouts", w, {});
  if (c.layouts.size() != 2) {
    ctx.fail(t.get("layouts") ? t.get("layouts") : &t,
             fmt::format("{}: layouts must name two layouts, the baseline and the candidate", w));
  }
  c.pipeline_size = get_int_in(ctx, t, "pp", w, 1, 1, 4096);
  c.num_microbatches = get_int_in(ctx, t, "microbatches", w, 1, 1, 100000);
  c.schedule = get_string(ctx, t, "schedule", w, "");
  c.costs = get_string(ctx, t, "costs", w, "");
  c.preset = get_string(ctx, t, "preset", w, "");
  c.split = get_bool(ctx, t, "split", w, false);
  c.cp = get_int_in(ctx, t, "cp", w, 1, 1, 4096);
  c.ep = get_int_in(ctx, t, "ep", w, 1, 1, 4096);
  c.collective_link = get_string(ctx, t, "collective_link", w, "");
  if (t.get("collective_link")) {
    try {
      sim::named_link(c.collective_link);
    } catch (const InputError& err) {
      ctx.fail(t.get("collective_link"), fmt::format("{}: collective_{}", w, err.what()));
    }
    if (c.cp == 1 && c.ep == 1) {
      ctx.fail(t.get("collective_link"),
               fmt::format("{}: collective_link prices the CP and EP collectives: set cp or ep "
                           "> 1 with it",
                           w));
    }
  }
  if (c.costs.empty()) {
    ctx.fail(t.get("costs") ? t.get("costs") : &t,
             fmt::format("{}: costs names the node costs (mtp-harness calibrate's JSON)", w));
  }
  e.judge = Judge::kFaster;
  e.simulated = c;
  e.why = get_string(ctx, t, "why", w, "");
  if (e.why.empty())
    ctx.fail(&t, fmt::format("{}: why is required: say why the relation must hold", w));
  return e;
}

}  // namespace

Expectation parse_expectation(const Ctx& ctx, const toml::table& t, size_t index,
                              const std::set<std::string>& variant_names, int64_t steps) {
  Expectation e;
  std::string w = fmt::format("[[expectation]] #{}", index + 1);
  if (const auto* n = t.get("name"); n && n->is_string()) {
    w = fmt::format("expectation \"{}\"", shown_name(n->value<std::string>().value()));
  }
  check_keys(ctx, t, w,
             {"name",
              "variants",
              "class",
              "records",
              "include",
              "exclude",
              "steps",
              "why",
              "first_divergence",
              "first_divergence_step",
              "allow_nonfinite",
              "detects",
              "layouts",
              "pp",
              "microbatches",
              "schedule",
              "costs",
              "preset",
              "split",
              "cp",
              "ep",
              "collective_link"});
  e.name = get_string(ctx, t, "name", w, "");
  if (!valid_name(e.name)) {
    ctx.fail(t.get("name") ? t.get("name") : &t,
             fmt::format("{}: name \"{}\" must be non-empty, at most {} bytes, not only dots, and "
                         "use only letters, digits, '_', '-', '.'",
                         w, shown_name(e.name), kMaxNameBytes));
  }
  w = fmt::format("expectation \"{}\"", e.name);
  const std::string cls = get_string(ctx, t, "class", w, "");
  if (cls.rfind("faster:", 0) == 0) return parse_faster(ctx, t, w, e, cls);
  for (const char* key : {"layouts", "pp", "microbatches", "schedule", "costs", "preset", "split",
                          "cp", "ep", "collective_link"}) {
    if (t.get(key)) {
      ctx.fail(t.get(key), fmt::format("{}: {} belongs to class \"faster:X\" only", w, key));
    }
  }
  e.variants = get_strings(ctx, t, "variants", w, {});
  e.judge = cls == "oracle"     ? Judge::kOracle
            : cls == "replicas" ? Judge::kReplicas
                                : Judge::kRecords;
  const bool per_variant = e.judge != Judge::kRecords;
  if (e.variants.size() < (per_variant ? 1u : 2u)) {
    ctx.fail(t.get("variants") ? t.get("variants") : &t,
             per_variant
                 ? fmt::format("{}: variants must name at least one variant", w)
                 : fmt::format("{}: variants must name at least two variants (class \"oracle\" "
                               "checks one or more against the float64 program, class "
                               "\"replicas\" their parameter copies)",
                               w));
  }
  std::set<std::string> seen;
  for (const auto& v : e.variants) {
    if (!variant_names.count(v))
      ctx.fail(t.get("variants"), fmt::format("{}: unknown variant \"{}\"", w, v));
    if (!seen.insert(v).second)
      ctx.fail(t.get("variants"), fmt::format("{}: variant \"{}\" listed twice", w, v));
  }
  if (e.judge == Judge::kRecords) {
    try {
      e.cls = compare::CompareClass::parse(cls);
    } catch (const InputError& err) {
      ctx.fail(t.get("class") ? t.get("class") : &t,
               fmt::format("{}: {}, or oracle, or replicas, or faster:X", w, err.what()));
    }
  } else if (e.judge == Judge::kReplicas) {
    e.cls = compare::CompareClass::parse("bitwise");
    if (t.get("records")) {
      ctx.fail(t.get("records"),
               fmt::format("{}: class \"replicas\" checks the copies record only; remove "
                           "records (include/exclude select parameters by name)",
                           w));
    }
  }
  const std::vector<std::string> oracle_groups{record::group_name(record::Group::kLoss),
                                               record::group_name(record::Group::kGrad),
                                               record::group_name(record::Group::kWeight)};
  e.selection.groups =
      get_strings(ctx, t, "records", w,
                  e.oracle() ? oracle_groups
                  : e.judge == Judge::kReplicas
                      ? std::vector<std::string>{record::group_name(record::Group::kCopies)}
                      : record::default_compared_groups());
  if (e.selection.groups.empty())
    ctx.fail(t.get("records"), fmt::format("{}: records must not be empty", w));
  if (std::set<std::string>(e.selection.groups.begin(), e.selection.groups.end()).size() !=
      e.selection.groups.size()) {
    ctx.fail(t.get("records"), fmt::format("{}: records lists a record twice", w));
  }
  for (const auto& g : e.selection.groups) {
    if (!record::parse_group(g)) {
      ctx.fail(t.get("records"), fmt::format("{}: records: unknown record \"{}\" (accepted: {})", w,
                                             g, fmt::join(record::record_groups(), ", ")));
    }
  }
  e.selection.include = get_strings(ctx, t, "include", w, {"*"});
  e.selection.exclude = get_strings(ctx, t, "exclude", w, {});
  for (const char* key : {"include", "exclude"}) {
    for (const auto& pat : get_strings(ctx, t, key, w, {})) {
      if (pat.empty() || pat.find_first_of("[]{}") != std::string::npos) {
        ctx.fail(t.get(key), fmt::format("{}: {} pattern \"{}\": patterns use only * and ? "
                                         "wildcards (no [], {{}}) and must not be empty",
                                         w, key, pat));
      }
    }
  }
  e.selection.steps = parse_steps(ctx, t.get("steps"), w, steps);
  if (e.oracle()) {
    for (const auto& g : e.selection.groups) {
      if (std::find(oracle_groups.begin(), oracle_groups.end(), g) == oracle_groups.end()) {
        ctx.fail(t.get("records"),
                 fmt::format("{}: class \"oracle\" compares the loss, grad and weight records "
                             "only, not \"{}\"",
                             w, g));
      }
    }
    if (!t.get("steps")) {
      e.selection.steps = {1};  // the oracle's default: the first training step
    } else if (e.selection.steps.count(0)) {
      ctx.fail(t.get("steps"), fmt::format("{}: class \"oracle\" checks training steps (≥ 1): "
                                           "step n is computed from the weights of step n − 1",
                                           w));
    }
  }
  e.why = get_string(ctx, t, "why", w, "");
  if (e.why.empty())
    ctx.fail(&t, fmt::format("{}: why is required: say why the relation must hold", w));
  e.allow_nonfinite = get_bool(ctx, t, "allow_nonfinite", w, false);
  e.first_divergence = get_string(ctx, t, "first_divergence", w, "");
  e.first_divergence_step = get_int_in(ctx, t, "first_divergence_step", w, 0, 0, 999999);
  if (e.first_divergence_step > steps) {
    ctx.fail(t.get("first_divergence_step"),
             fmt::format("{}: first_divergence_step = {} is past the "
                         "last step {}",
                         w, e.first_divergence_step, steps));
  }
  if (t.get("detects")) {
    e.detects = get_enum<config::Fault>(ctx, t, "detects", w, config::Fault::kNone);
    if (e.detects == config::Fault::kNone || e.cls.kind == compare::CompareClass::Kind::kDiffer) {
      ctx.fail(t.get("detects"),
               fmt::format("{}: detects names a planted bug (not \"none\") and needs a class that "
                           "the bug must break (not differ)",
                           w));
    }
  }
  if (e.detects) {
    // A detector names where the fault must show first: a tensor of a compared record at a
    // compared step; one that can never be met is an error now, not a failure after training.
    if (e.first_divergence.empty() || e.first_divergence_step == 0) {
      ctx.fail(t.get("detects"),
               fmt::format("{}: a detector needs first_divergence (\"<group>/<tensor>\") and "
                           "first_divergence_step (>= 1): where the fault must be caught first",
                           w));
    }
    if (!e.selection.steps.empty() && !e.selection.steps.count(e.first_divergence_step)) {
      ctx.fail(t.get("first_divergence_step"),
               fmt::format("{}: first_divergence_step = {} is not among the compared steps", w,
                           e.first_divergence_step));
    }
    const size_t slash = e.first_divergence.find('/');
    const std::string group = e.first_divergence.substr(0, slash);
    std::vector<std::string> groups = e.selection.groups;
    if (e.oracle()) groups.push_back("attr");  // the oracle's attr/grad_norm
    const bool any = std::any_of(groups.begin(), groups.end(),
                                 [&](const std::string& g) { return glob_match(group, g); });
    if (slash == std::string::npos || !any) {
      ctx.fail(t.get("first_divergence"),
               fmt::format("{}: first_divergence = \"{}\" must be \"<group>/<tensor>\" with "
                           "a compared group ({})",
                           w, e.first_divergence, fmt::join(groups, ", ")));
    }
  }
  if ((!e.first_divergence.empty() || e.first_divergence_step != 0) &&
      e.cls.kind != compare::CompareClass::Kind::kDiffer && !e.detects) {
    ctx.fail(t.get("first_divergence") ? t.get("first_divergence") : t.get("first_divergence_step"),
             fmt::format("{}: first_divergence applies to class \"differ\" and to detectors "
                         "(detects) only",
                         w));
  }
  return e;
}

}  // namespace

std::set<int> parse_step_spec(const std::string& spec, int max_step) {
  std::set<int> out;
  if (spec == "all") return out;
  auto bad = [&]() {
    return InputError(
        fmt::format("steps = \"{}\": expected \"all\", \"A\", \"A-B\", \"A-\" or "
                    "\"A,B,...\" with steps in 0..{}",
                    spec, max_step));
  };
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string part = spec.substr(pos, comma - pos);
    const size_t dash = part.find('-');
    auto number = [&](const std::string& t) {
      if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos)
        throw bad();
      return std::stoi(t);
    };
    int a = 0, b = 0;
    if (dash == std::string::npos) {
      a = b = number(part);
    } else {
      a = number(part.substr(0, dash));
      b = dash + 1 < part.size() ? number(part.substr(dash + 1)) : max_step;
    }
    if (a > b || b > max_step) throw bad();
    for (int x = a; x <= b; ++x) out.insert(x);
    pos = comma + 1;
  }
  return out;
}

std::string Scenario::position(const std::string& key) const {
  for (std::string k = key;;) {
    if (auto it = positions.find(k); it != positions.end()) return it->second;
    const size_t dot = k.rfind('.');
    if (dot == std::string::npos) return source;
    k.resize(dot);
  }
}

const config::VariantSpec& Scenario::variant(const std::string& n) const {
  for (const auto& v : variants) {
    if (v.name == n) return v;
  }
  throw InputError(fmt::format("{}: no variant named \"{}\"", source, n));
}

std::string Scenario::variant_location(const std::string& n) const {
  return position("variant." + n);
}

Scenario parse_scenario(const std::string& text, const std::string& source) {
  Ctx ctx(source);
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& err) {
    throw InputError(fmt::format("{}:{}:{}: TOML syntax error: {}", source, err.source().begin.line,
                                 err.source().begin.column, err.description()));
  }
  check_keys(ctx, root, "top level",
             {"scenario", "model", "training", "data", "variant", "expectation"});
  Scenario sc;
  sc.source = source;
  sc.text = text;
  if (const toml::table* s = get_table(ctx, root, "scenario")) {
    check_keys(ctx, *s, "[scenario]", {"name", "description", "fault_injection"});
    sc.name = get_string(ctx, *s, "name", "[scenario]", "");
    sc.description = get_string(ctx, *s, "description", "[scenario]", "");
    sc.fault_injection = get_bool(ctx, *s, "fault_injection", "[scenario]", false);
  }
  if (!valid_name(sc.name)) {
    ctx.fail(root.get("scenario"),
             fmt::format("[scenario].name is required, at most {} bytes (it names the run "
                         "directory), not only dots, and uses only letters, digits, '_', '-', '.'",
                         kMaxNameBytes));
  }
  if (const toml::table* t = get_table(ctx, root, "model"))
    parse_model(ctx, *t, sc.model);
  else
    sc.model.validate();
  if (const toml::table* t = get_table(ctx, root, "training")) parse_training(ctx, *t, sc.training);
  if (const toml::table* t = get_table(ctx, root, "data"))
    parse_data(ctx, *t, sc.data, sc.model.vocab_size);
  check_data(ctx, root, sc);

  const toml::node* vn = root.get("variant");
  if (vn == nullptr || !vn->is_array_of_tables() || vn->as_array()->empty()) {
    ctx.fail(vn, "the scenario needs at least one [[variant]] table");
  }
  std::set<std::string> names;
  size_t i = 0;
  for (const auto& node : *vn->as_array()) {
    auto v = parse_variant(ctx, *node.as_table(), i++);
    if (!names.insert(v.name).second)
      ctx.fail(&node, fmt::format("variant \"{}\" is defined twice", v.name));
    if (!v.resume_of.empty()) {
      v = resumed_variant(ctx, *node.as_table(), v, sc);
      sc.variants.push_back(std::move(v));
      continue;
    }
    check_variant_layout(ctx, *node.as_table(), v, config::variant_model(sc.model, v));
    // The model-level CP / EP rules at parse time, so a bad variant fails the scenario whichever
    // variants a run selects (the planner states the implementation's rules: engine/plan.cc).
    {
      const config::ModelConfig vm = config::variant_model(sc.model, v);
      const toml::table& vt = *node.as_table();
      if (const std::string why = config::context_parallel_misfit(vm, v.context_parallel_size);
          !why.empty()) {
        ctx.fail(vt.get("cp"),
                 fmt::format("variant \"{}\": cp = {} {}", v.name, v.context_parallel_size, why));
      }
      if (const std::string why = config::expert_parallel_misfit(vm, v.expert_parallel_size);
          !why.empty()) {
        ctx.fail(vt.get("ep"),
                 fmt::format("variant \"{}\": ep = {} {}", v.name, v.expert_parallel_size, why));
      }
    }
    if (v.inject && !sc.fault_injection) {
      ctx.fail(node.as_table()->get("inject"),
               fmt::format("variant \"{}\": inject plants a bug; only a scenario whose [scenario] "
                           "table says fault_injection = true may (scenarios/faults.toml)",
                           v.name));
    }
    try {
      config::variant_num_microbatches(sc.training, config::variant_model(sc.model, v), v);
    } catch (const InputError& e) {
      const toml::table& vt = *node.as_table();
      ctx.fail(vt.get("dp") ? vt.get("dp") : &node, e.what());
    }
    sc.variants.push_back(std::move(v));
  }
  if (const toml::node* en = root.get("expectation")) {
    if (!en->is_array_of_tables())
      ctx.fail(en, "expectation must be written as [[expectation]] tables");
    std::set<std::string> enames;
    i = 0;
    for (const auto& node : *en->as_array()) {
      auto e = parse_expectation(ctx, *node.as_table(), i++, names, sc.training.steps);
      if (e.detects) {
        const bool planted = std::any_of(e.variants.begin(), e.variants.end(), [&](const auto& n) {
          const auto& v = std::find_if(sc.variants.begin(), sc.variants.end(),
                                       [&](const auto& x) { return x.name == n; });
          return v->inject == e.detects;
        });
        if (!planted) {
          ctx.fail(node.as_table()->get("detects"),
                   fmt::format("expectation \"{}\": detects \"{}\", but none of its variants "
                               "injects it",
                               e.name, config::enum_name(*e.detects)));
        }
      }
      if (e.judge == Judge::kFaster) check_simulated_claim(ctx, *node.as_table(), e, sc.model);
      if (e.judge == Judge::kReplicas) {
        for (const auto& vname : e.variants) {
          const config::VariantSpec& v = sc.variant(vname);
          if (v.expert_parallel_size > 1) {
            ctx.fail(node.as_table()->get("variants"),
                     fmt::format("expectation \"{}\": class \"replicas\" cannot judge variant "
                                 "\"{}\" (ep = {}): a routed expert is held by one rank of "
                                 "each EP group, so its copies are not every rank's, and "
                                 "record_copies is refused with ep > 1",
                                 e.name, vname, v.expert_parallel_size));
          }
        }
      }
      if (e.judge == Judge::kReplicas && !sc.training.record_copies) {
        const toml::table& et = *node.as_table();
        ctx.fail(et.get("class"),
                 fmt::format("expectation \"{}\": class \"replicas\" reads the copies record: set "
                             "[training] record_copies = true in the scenario (--record-copies "
                             "applies after the scenario is read)",
                             e.name));
      }
      // A resumed variant's record holds steps resume_step .. steps: a comparison with it must
      // select later steps only, or it fails on structure, not on a resume bug.
      if (e.judge == Judge::kRecords || e.judge == Judge::kOracle) {
        for (const auto& vname : e.variants) {
          const config::VariantSpec& v = sc.variant(vname);
          if (v.resume_of.empty()) continue;
          const bool later = !e.selection.steps.empty() &&
                             *e.selection.steps.begin() > static_cast<int>(v.resume_step);
          if (!later) {
            const toml::table& et = *node.as_table();
            ctx.fail(et.get("steps") ? et.get("steps") : &node,
                     fmt::format("expectation \"{}\": variant \"{}\" resumes at step {}, so its "
                                 "record holds steps {}..{}: select steps after {} (e.g. steps = "
                                 "\"{}-\")",
                                 e.name, vname, v.resume_step, v.resume_step, sc.training.steps,
                                 v.resume_step, v.resume_step + 1));
          }
        }
      }
      if (!enames.insert(e.name).second)
        ctx.fail(&node, fmt::format("expectation \"{}\" is defined twice", e.name));
      sc.expectations.push_back(std::move(e));
    }
  }
  record_positions(ctx, root, sc);
  return sc;
}

void check_expectation_selections(const Scenario& sc) {
  for (const auto& e : sc.expectations) {
    // The names a record of each of the expectation's variants holds in the selected groups
    // (record/schema.h; an untie_embeddings override adds or drops the head, the λ override
    // changes no name). Sizes and dtypes do not matter here.
    if (e.judge == Judge::kFaster) continue;  // no records
    std::vector<std::string> names;
    for (const auto& vname : e.variants) {
      const config::ModelConfig m = config::variant_model(sc.model, sc.variant(vname));
      if (e.judge == Judge::kReplicas) {  // patterns match the copied parameter's name
        for (const auto& spec : config::parameter_specs(m)) names.push_back(spec.name);
        continue;
      }
      record::StepContents contents;
      contents.mtp_num_layers = m.mtp_num_layers;
      for (const auto& spec : config::parameter_specs(m)) contents.params.push_back({spec.name, 0});
      contents.model_dtype = record::DType::kBF16;  // names only: every group listed
      contents.optimizer_state = true;
      for (const auto& g : e.selection.groups) {
        for (auto& n : record::step_tensor_names(contents, *record::parse_group(g))) {
          names.push_back(std::move(n));
        }
      }
    }
    bool any = false;
    for (const auto& n : names) {
      any = any ||
            (glob_match_any(e.selection.include, n) && !glob_match_any(e.selection.exclude, n));
    }
    if (!any) {
      const std::string base = "expectation." + e.name;
      const std::string key = sc.positions.count(base + ".include")   ? base + ".include"
                              : sc.positions.count(base + ".exclude") ? base + ".exclude"
                                                                      : base + ".records";
      throw InputError(
          fmt::format("{}: expectation \"{}\": include/exclude select no tensor of "
                      "records [{}]",
                      sc.position(key), e.name, fmt::join(e.selection.groups, ", ")));
    }
  }
}

Scenario load_scenario(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    // The system's reason: missing, a symlink loop, a permission.
    throw InputError(
        fmt::format("{}: cannot open scenario file: {}", printable(path), std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    throw InputError(fmt::format("{}: is a directory, not a scenario file", printable(path)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw InputError(fmt::format("{}: is not a regular file", printable(path)));
  }
  // Scenarios are a few KiB of TOML: a huge (or sparse) file is a mistake, refused before
  // reading a byte of it.
  constexpr off_t kMaxScenarioBytes = off_t{4} << 20;
  if (st.st_size > kMaxScenarioBytes) {
    throw InputError(
        fmt::format("{}: the scenario file has {} bytes; a scenario may have at most "
                    "{} (4 MiB)",
                    printable(path), static_cast<int64_t>(st.st_size),
                    static_cast<int64_t>(kMaxScenarioBytes)));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(
        fmt::format("{}: cannot open scenario file: {}", printable(path), std::strerror(errno)));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), path);
}

}  // namespace mtp::scenario
