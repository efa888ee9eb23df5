#include "harness/config/hyperparameters.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>

namespace mtp::config {
namespace {

template <class C>
using Row = Hyperparameter<C>;

/// An integer member with an inclusive range (max: none when INT64_MAX).
template <class C>
Row<C> int_row(const char* key, const char* attr, int64_t C::*m, int64_t lo, int64_t hi,
               const char* help) {
  Row<C> r;
  r.key = key;
  r.record_attr = attr;
  r.type = HyperType::kInt;
  r.help = help;
  r.rule = [lo, hi](const HyperValue& v) -> std::string {
    const int64_t x = std::get<int64_t>(v);
    if (hi == INT64_MAX) return x >= lo ? "" : fmt::format("must be >= {}", lo);
    return x >= lo && x <= hi ? "" : fmt::format("must be in [{}, {}]", lo, hi);
  };
  r.get = [m](const C& c) -> HyperValue { return c.*m; };
  r.set = [m](C& c, const HyperValue& v) { c.*m = std::get<int64_t>(v); };
  return r;
}

/// What a floating-point member must be, besides finite.
enum class Sign { kAny, kNonNegative, kPositive, kUnitInterval };

/// A floating-point member; `note` is appended to the rule's verdict ("(0 = clipping off)").
template <class C>
Row<C> double_row(const char* key, const char* attr, double C::*m, Sign sign, const char* help,
                  const char* note = "") {
  Row<C> r;
  r.key = key;
  r.record_attr = attr;
  r.type = HyperType::kDouble;
  r.help = help;
  r.rule = [sign, note](const HyperValue& v) -> std::string {
    const double x = std::get<double>(v);
    const std::string tail = *note ? std::string(" ") + note : "";
    switch (sign) {
      case Sign::kAny:
        return std::isfinite(x) ? "" : "is not finite" + tail;
      case Sign::kNonNegative:
        return std::isfinite(x) && x >= 0 ? "" : "is not finite and >= 0" + tail;
      case Sign::kPositive:
        return std::isfinite(x) && x > 0 ? "" : "is not finite and > 0" + tail;
      case Sign::kUnitInterval:
        return x >= 0 && x < 1 ? "" : "is not in [0, 1)" + tail;
    }
    return "";
  };
  r.get = [m](const C& c) -> HyperValue { return c.*m; };
  r.set = [m](C& c, const HyperValue& v) { c.*m = std::get<double>(v); };
  return r;
}

template <class C>
Row<C> bool_row(const char* key, const char* attr, bool C::*m, const char* help) {
  Row<C> r;
  r.key = key;
  r.record_attr = attr;
  r.type = HyperType::kBool;
  r.help = help;
  r.rule = [](const HyperValue&) { return std::string(); };
  r.get = [m](const C& c) -> HyperValue { return c.*m; };
  r.set = [m](C& c, const HyperValue& v) { c.*m = std::get<bool>(v); };
  return r;
}

template <class C, class E>
Row<C> enum_row(const char* key, const char* attr, E C::*m, const char* help) {
  Row<C> r;
  r.key = key;
  r.record_attr = attr;
  r.type = HyperType::kEnum;
  r.help = help;
  r.choices = enum_names<E>();
  r.rule = [](const HyperValue& v) -> std::string {
    for (const auto& name : enum_names<E>()) {
      if (name == std::get<std::string>(v)) return "";
    }
    return fmt::format("is not one of {}", accepted_names<E>());
  };
  r.get = [m](const C& c) -> HyperValue { return enum_name(c.*m); };
  r.set = [m](C& c, const HyperValue& v) { c.*m = parse_enum<E>(std::get<std::string>(v)); };
  return r;
}

template <class C>
Row<C> moe(Row<C> r) {
  r.moe_only = true;
  return r;
}

std::vector<Row<ModelConfig>> make_model_rows() {
  using M = ModelConfig;
  constexpr int64_t kNoMax = INT64_MAX;
  std::vector<Row<M>> rows;
  rows.push_back(int_row<M>("num_layers", "num_layers", &M::num_layers, 1, kNoMax,
                            "N, decoder layers of the trunk"));
  rows.push_back(int_row<M>("hidden_size", "hidden_size", &M::hidden_size, 1, kNoMax, "H"));
  rows.push_back(int_row<M>("ffn_hidden_size", "ffn_hidden_size", &M::ffn_hidden_size, 1, kNoMax,
                            "F, the SwiGLU MLP's width (fc1 has 2F rows)"));
  rows.push_back(int_row<M>("num_attention_heads", "num_attention_heads", &M::num_attention_heads,
                            1, kNoMax, "nh"));
  rows.push_back(int_row<M>("num_query_groups", "num_query_groups", &M::num_query_groups, 1, kNoMax,
                            "ng (GQA); default: num_attention_heads"));
  {
    Row<M> kv;
    kv.record_attr = "kv_channels";
    kv.help = "hn = H / nh (derived; recorded for Megatron's readers)";
    kv.rule = [](const HyperValue&) { return std::string(); };
    kv.get = [](const M& c) -> HyperValue { return c.kv_channels(); };
    rows.push_back(kv);
  }
  rows.push_back(int_row<M>("vocab_size", "vocab_size", &M::vocab_size, 1, kNoMax,
                            "V (byte-level tokens need >= 256)"));
  rows.push_back(int_row<M>("seq_length", "seq_length", &M::seq_length, 2, kNoMax, "s"));
  rows.push_back(
      int_row<M>("micro_batch_size", "micro_batch_size", &M::micro_batch_size, 1, kNoMax, "b"));
  rows.push_back(int_row<M>("mtp_num_layers", "mtp_num_layers", &M::mtp_num_layers, 0, kNoMax,
                            "D, MTP depths (0 = no MTP)"));
  rows.push_back(double_row<M>("mtp_loss_scaling_factor", "mtp_loss_scaling_factor",
                               &M::mtp_loss_scaling_factor, Sign::kAny,
                               "lambda: L = L_lm + lambda/D * sum of the MTP losses"));
  rows.push_back(
      double_row<M>("rotary_base", "rotary_base", &M::rotary_base, Sign::kAny, "RoPE base"));
  rows.push_back(double_row<M>("norm_epsilon", "norm_epsilon", &M::norm_epsilon, Sign::kAny,
                               "RMSNorm epsilon"));
  {
    Row<M> r =
        bool_row<M>("untie_embeddings", "untie_embeddings_and_output_weights", &M::untie_embeddings,
                    "false: the output head uses the word-embedding table");
    rows.push_back(r);
  }
  rows.push_back(bool_row<M>(
      "calculate_per_token_loss", "calculate_per_token_loss", &M::calculate_per_token_loss,
      "true: normalise by the global batch's token counts (Megatron's per-token loss)"));
  rows.push_back(int_row<M>("num_moe_experts", "num_moe_experts", &M::num_moe_experts, 0, kNoMax,
                            "E routed experts; 0 = a dense MLP in every layer"));
  rows.push_back(moe(int_row<M>("moe_router_topk", "moe_router_topk", &M::moe_router_topk, 1,
                                kNoMax, "k experts per token")));
  {
    Row<M> r =
        moe(int_row<M>("moe_ffn_hidden_size", "moe_ffn_hidden_size", &M::moe_ffn_hidden_size, 0,
                       kNoMax, "F_moe per routed expert; 0 = ffn_hidden_size (recorded applied)"));
    // Records hold the width the experts have (Megatron's default applied).
    r.get = [](const M& c) -> HyperValue { return c.moe_expert_ffn_hidden_size(); };
    rows.push_back(r);
  }
  rows.push_back(moe(int_row<M>(
      "moe_shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
      &M::moe_shared_expert_intermediate_size, 0, kNoMax, "F_sh of the shared expert; 0 = none")));
  {
    Row<M> r;
    r.key = "moe_layer_freq";
    r.record_attr = "moe_layer_freq";
    r.type = HyperType::kIntList;
    r.help = "per decoder layer 1 = MoE, 0 = dense; empty: every layer MoE";
    r.moe_only = true;
    r.rule = [](const HyperValue& v) -> std::string {
      for (int64_t x : std::get<std::vector<int64_t>>(v)) {
        if (x != 0 && x != 1) return "entries must be 0 (dense) or 1 (MoE)";
      }
      return "";
    };
    r.get = [](const M& c) -> HyperValue {
      return std::vector<int64_t>(c.moe_layer_freq.begin(), c.moe_layer_freq.end());
    };
    r.set = [](M& c, const HyperValue& v) {
      const auto& l = std::get<std::vector<int64_t>>(v);
      c.moe_layer_freq.assign(l.begin(), l.end());
    };
    rows.push_back(r);
  }
  {
    Row<M> r;
    r.record_attr = "moe_router_score_function";
    r.type = HyperType::kEnum;
    r.help = "the router's score function (this build: sigmoid, DeepSeek-V3)";
    r.moe_only = true;
    r.choices = {"sigmoid"};
    r.rule = [](const HyperValue& v) -> std::string {
      return std::get<std::string>(v) == "sigmoid"
                 ? ""
                 : "is not sigmoid, the only router this build has";
    };
    r.get = [](const M&) -> HyperValue { return std::string("sigmoid"); };
    rows.push_back(r);
  }
  rows.push_back(moe(bool_row<M>("moe_router_enable_expert_bias", "moe_router_enable_expert_bias",
                                 &M::moe_router_enable_expert_bias,
                                 "add moe_router_expert_bias to the scores for selection only")));
  {
    Row<M> r;
    r.key = "moe_router_expert_bias";
    r.record_attr = "moe_router_expert_bias";
    r.type = HyperType::kDoubleList;
    r.help = "[E] selection bias; empty = zeros";
    r.moe_only = true;
    r.rule = [](const HyperValue&) { return std::string(); };
    r.get = [](const M& c) -> HyperValue { return c.moe_router_expert_bias; };
    r.set = [](M& c, const HyperValue& v) {
      c.moe_router_expert_bias = std::get<std::vector<double>>(v);
    };
    rows.push_back(r);
  }
  rows.push_back(moe(double_row<M>(
      "moe_router_topk_scaling_factor", "moe_router_topk_scaling_factor",
      &M::moe_router_topk_scaling_factor, Sign::kAny, "gates times this after normalisation")));
  rows.push_back(enum_row<M>("kernels", "kernels", &M::kernels,
                             "torch (LibTorch ops) or harness (kernels/ops.h)"));
  rows.push_back(enum_row<M>("attention_backend", "attention_backend", &M::attention_backend,
                             "unfused (any dtype, device) or flash (bf16 on CUDA)"));
  return rows;
}

std::vector<Row<TrainingConfig>> make_training_rows() {
  using T = TrainingConfig;
  std::vector<Row<T>> rows;
  rows.push_back(int_row<T>("steps", nullptr, &T::steps, 1, 100000, "optimizer steps"));
  rows.push_back(int_row<T>("num_microbatches", nullptr, &T::num_microbatches, 1, 100000,
                            "M per data-parallel rank"));
  {
    Row<T> r;
    r.key = "seed";
    r.record_attr = "seed";
    r.type = HyperType::kInt;
    r.help = "initial weights (per-parameter generators)";
    r.rule = [](const HyperValue& v) -> std::string {
      return std::get<int64_t>(v) >= 0 ? "" : "must be >= 0";
    };
    r.get = [](const T& c) -> HyperValue { return static_cast<int64_t>(c.seed); };
    r.set = [](T& c, const HyperValue& v) { c.seed = static_cast<uint64_t>(std::get<int64_t>(v)); };
    rows.push_back(r);
  }
  rows.push_back(
      double_row<T>("lr", "lr", &T::lr, Sign::kNonNegative, "Adam learning rate (constant)"));
  rows.push_back(
      double_row<T>("adam_beta1", "adam_beta1", &T::adam_beta1, Sign::kUnitInterval, "Adam beta1"));
  rows.push_back(
      double_row<T>("adam_beta2", "adam_beta2", &T::adam_beta2, Sign::kUnitInterval, "Adam beta2"));
  rows.push_back(
      double_row<T>("adam_eps", "adam_eps", &T::adam_eps, Sign::kPositive, "Adam epsilon"));
  rows.push_back(double_row<T>("weight_decay", "weight_decay", &T::weight_decay, Sign::kNonNegative,
                               "decoupled (AdamW), as Megatron's Adam"));
  rows.push_back(double_row<T>("clip_grad", "clip_grad", &T::clip_grad, Sign::kNonNegative,
                               "max global grad norm; 0 = clipping off", "(0 = clipping off)"));
  rows.push_back(enum_row<T>("dtype", "dtype", &T::dtype,
                             "parameters, activations and main grads (bf16: fp32 masters)"));
  rows.push_back(enum_row<T>("device", "device", &T::device, "cpu or cuda"));
  rows.push_back(bool_row<T>("save_optimizer_state", nullptr, &T::save_optimizer_state,
                             "record each step's Adam state (resumable)"));
  rows.push_back(bool_row<T>("record_copies", nullptr, &T::record_copies,
                             "record every parameter copy (group copies; replicas expectation)"));
  rows.push_back(
      enum_row<T>("record", "record_mode", &T::record, "what records keep of grads and weights"));
  return rows;
}

template <class C>
const Row<C>* by_attr(const std::vector<Row<C>>& rows, const std::string& attr) {
  for (const auto& r : rows) {
    if (r.record_attr != nullptr && attr == r.record_attr) return &r;
  }
  return nullptr;
}

}  // namespace

template <class Config>
RecordedValue Hyperparameter<Config>::recorded(const Config& c) const {
  const HyperValue v = get(c);
  switch (type) {
    case HyperType::kInt:
      return std::get<int64_t>(v);
    case HyperType::kDouble:
      return std::get<double>(v);
    case HyperType::kBool:
      return int64_t{std::get<bool>(v) ? 1 : 0};
    case HyperType::kEnum:
      return std::get<std::string>(v);
    case HyperType::kIntList:
      return fmt::format("[{}]", fmt::join(std::get<std::vector<int64_t>>(v), ","));
    case HyperType::kDoubleList:
      return fmt::format("[{}]", fmt::join(std::get<std::vector<double>>(v), ","));
  }
  return std::string();
}

template struct Hyperparameter<ModelConfig>;
template struct Hyperparameter<TrainingConfig>;

const std::vector<Hyperparameter<ModelConfig>>& model_hyperparameters() {
  static const std::vector<Row<ModelConfig>> rows = make_model_rows();
  return rows;
}

const std::vector<Hyperparameter<TrainingConfig>>& training_hyperparameters() {
  static const std::vector<Row<TrainingConfig>> rows = make_training_rows();
  return rows;
}

const Hyperparameter<ModelConfig>* model_hyperparameter_by_attr(const std::string& attr) {
  return by_attr(model_hyperparameters(), attr);
}

const Hyperparameter<TrainingConfig>* training_hyperparameter_by_attr(const std::string& attr) {
  return by_attr(training_hyperparameters(), attr);
}

bool is_hyperparameter_attr(const std::string& attr) {
  return model_hyperparameter_by_attr(attr) != nullptr ||
         training_hyperparameter_by_attr(attr) != nullptr;
}

std::optional<std::vector<double>> parse_recorded_list(const std::string& text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  std::vector<double> out;
  const std::string body = text.substr(1, text.size() - 2);
  for (size_t pos = 0; pos < body.size();) {
    const size_t end = std::min(body.find(',', pos), body.size());
    std::string item = body.substr(pos, end - pos);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    try {
      size_t used = 0;
      out.push_back(std::stod(item, &used));
      if (used != item.size()) return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
    pos = end + 1;
  }
  return out;
}

template <class Config>
std::optional<HyperValue> from_recorded(const Hyperparameter<Config>& h, const RecordedValue& v) {
  switch (h.type) {
    case HyperType::kInt:
      if (const int64_t* i = std::get_if<int64_t>(&v)) return HyperValue(*i);
      return std::nullopt;
    case HyperType::kDouble:
      if (const double* d = std::get_if<double>(&v)) return HyperValue(*d);
      if (const int64_t* i = std::get_if<int64_t>(&v)) return HyperValue(static_cast<double>(*i));
      return std::nullopt;
    case HyperType::kBool:
      if (const int64_t* i = std::get_if<int64_t>(&v); i && (*i == 0 || *i == 1)) {
        return HyperValue(*i != 0);
      }
      return std::nullopt;
    case HyperType::kEnum:
      if (const std::string* s = std::get_if<std::string>(&v)) return HyperValue(*s);
      return std::nullopt;
    case HyperType::kIntList:
    case HyperType::kDoubleList: {
      const std::string* s = std::get_if<std::string>(&v);
      if (s == nullptr) return std::nullopt;
      const auto list = parse_recorded_list(*s);
      if (!list) return std::nullopt;
      if (h.type == HyperType::kDoubleList) return HyperValue(*list);
      std::vector<int64_t> ints;
      for (double x : *list) {
        // NaN and 1e300 too: nothing that is not an exact small integer is narrowed.
        if (!(x == std::floor(x) && std::fabs(x) < 1e15)) return std::nullopt;
        ints.push_back(static_cast<int64_t>(x));
      }
      return HyperValue(ints);
    }
  }
  return std::nullopt;
}

template std::optional<HyperValue> from_recorded(const Hyperparameter<ModelConfig>&,
                                                 const RecordedValue&);
template std::optional<HyperValue> from_recorded(const Hyperparameter<TrainingConfig>&,
                                                 const RecordedValue&);

}  // namespace mtp::config
