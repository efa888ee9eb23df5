// File: harness/config/hyperparameters.h
//
// The one table of the model's and the optimizer's hyperparameters. Each row names a setting's
// scenario key, its record attribute (Megatron-LM's argument name), its type, the rule a value
// must follow on its own, a line of help, and how to read and set it on ModelConfig or
// TrainingConfig (whose member initialisers are the defaults). Read by the scenario parser
// ([model], [training]: the accepted keys, their types and rules), the record's root attributes
// (engine/step_recorder.cc), replay's reading of a record (replay/record_run.cc: types and
// rules of what a record says) and `mtp-harness compare` (which attributes say what was
// trained). Adding a hyperparameter is a member of the config struct and one row here; rules
// across settings stay in ModelConfig::validate. Torch-free.
//
//   for (const auto& h : config::model_hyperparameters()) std::cout << h.key << ": " << h.help;
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "harness/config/model_config.h"
#include "harness/config/run_config.h"

namespace mtp::config {

/// A hyperparameter's value as a scenario or a record gives it: an integer, a number, a boolean,
/// an enum's spelling ("torch"), a list of integers (moe_layer_freq) or of numbers.
using HyperValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;

/// How a record stores a hyperparameter (record::AttrValue): integers and booleans (0/1) as
/// int64, numbers as double, enums by name and lists as "[a,b,…]" strings.
using RecordedValue = std::variant<int64_t, double, std::string>;

/// The type of a hyperparameter, which decides how a scenario spells it and a record stores it.
enum class HyperType { kInt, kDouble, kBool, kEnum, kIntList, kDoubleList };

/// One row of the table for config struct `Config` (ModelConfig or TrainingConfig).
template <class Config>
struct Hyperparameter {
  /// The scenario key under [model] / [training]; nullptr for a recorded value no scenario sets
  /// (kv_channels, derived; moe_router_score_function, fixed).
  const char* key = nullptr;
  /// The record's root attribute (Megatron-LM's argument name); nullptr when not recorded.
  const char* record_attr = nullptr;
  HyperType type = HyperType::kInt;
  const char* help = "";
  /// MoE settings: recorded only for a model with num_moe_experts > 0.
  bool moe_only = false;
  /// The accepted spellings of a kEnum (config::enum_names).
  std::vector<std::string> choices;
  /// Why `v` (of `type`) is not allowed on its own ("must be >= 1"), "" when it is.
  std::function<std::string(const HyperValue&)> rule;
  /// The value of `c`.
  std::function<HyperValue(const Config&)> get;
  /// Sets `c`'s member from `v` (of `type`; a kEnum's spelling is one of `choices`). Null for a
  /// row no scenario sets.
  std::function<void(Config&, const HyperValue&)> set;

  /// The attribute value a record holds for `c` (booleans 0/1, enums by name, lists "[a,b]").
  RecordedValue recorded(const Config& c) const;
};

/// The [model] table, in the order a scenario's keys are checked.
const std::vector<Hyperparameter<ModelConfig>>& model_hyperparameters();
/// The [training] settings that are hyperparameters of the step (steps, M, seed, Adam, clipping,
/// dtype, device, what is recorded). global_batch_size, init_from and dump_steps are not rows:
/// they say which data and weights a run starts from and which steps are kept, and the scenario
/// parser reads them itself.
const std::vector<Hyperparameter<TrainingConfig>>& training_hyperparameters();

/// The row whose record attribute is `attr`, or null.
const Hyperparameter<ModelConfig>* model_hyperparameter_by_attr(const std::string& attr);
const Hyperparameter<TrainingConfig>* training_hyperparameter_by_attr(const std::string& attr);

/// Whether record attribute `attr` is a hyperparameter (what was trained, not how the run was
/// laid out): a row of either table.
bool is_hyperparameter_attr(const std::string& attr);

/// The value a record's attribute gives for row `h`: nullopt when `v` does not have the row's
/// type (an int for a kDouble is taken as a number; "[a,b]" lists are parsed). Throws nothing.
template <class Config>
std::optional<HyperValue> from_recorded(const Hyperparameter<Config>& h, const RecordedValue& v);

/// "[0,1,1]" / "[0.1,-0.2]" as a record stores a list; nullopt when `text` is not such a list.
std::optional<std::vector<double>> parse_recorded_list(const std::string& text);

}  // namespace mtp::config
