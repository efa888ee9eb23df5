// mtp-harness equiv: is layout A equivalent to layout B? Two variants of a built-in model,
// trained and compared bitwise in one command (commands.h).

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cctype>
#include <iostream>
#include <sstream>

#include "harness/cli/commands.h"
#include "harness/cli/scenario_runner.h"
#include "harness/common/output_file.h"
#include "harness/common/temp_file.h"
#include "harness/compare/compare_json.h"
#include "harness/engine/plan.h"
#include "harness/layout/layout.h"
#include "harness/record/schema.h"
#include "harness/scenario/scenario.h"
#include "scenarios/embedded.h"

namespace mtp::cli {
namespace {

/// P of layout B: --pp-b, else --pp.
int pp_b(const EquivOptions& opt) {
  return opt.pipeline_size_b > 0 ? opt.pipeline_size_b : opt.pipeline_size;
}

/// The implementation of each layout: --impl's, else the reference for a layout with MTP
/// co-located with the loss and the candidate for a standalone one (the reference rejects it).
std::pair<config::Implementation, config::Implementation> implementations(
    const EquivOptions& opt, const scenario::Scenario& model) {
  if (!opt.impls.empty()) {
    const size_t comma = opt.impls.find(',');
    if (comma == std::string::npos || opt.impls.find(',', comma + 1) != std::string::npos) {
      throw InputError(
          fmt::format("--impl \"{}\": expected two implementations, A,B (e.g. "
                      "reference,candidate)",
                      opt.impls));
    }
    return {config::parse_enum<config::Implementation>(opt.impls.substr(0, comma), "--impl"),
            config::parse_enum<config::Implementation>(opt.impls.substr(comma + 1), "--impl")};
  }
  auto pick = [&](const std::string& layout, const char* which, int pp) {
    config::VariantSpec v;
    v.layout = layout;
    v.pipeline_size = pp;
    try {
      return engine::variant_layout(v, model.model).mtp_standalone
                 ? config::Implementation::kCandidate
                 : config::Implementation::kReference;
    } catch (const layout::LayoutError& e) {
      throw InputError(
          fmt::format("layout {} \"{}\" (P = {}, --model {}: {} decoder layers, "
                      "{} MTP depths): {}",
                      which, layout, pp, opt.model, model.model.num_layers,
                      model.model.mtp_num_layers, e.what()));
    }
  };
  return {pick(opt.layout_a, "A", opt.pipeline_size), pick(opt.layout_b, "B", pp_b(opt))};
}

/// The scenario text of the comparison: the built-in model's [scenario], [model], [training]
/// and [data] with the options applied, two variants A and B and one bitwise expectation.
std::string equiv_scenario_text(const EquivOptions& opt, const char* model_text,
                                config::Implementation a, config::Implementation b) {
  toml::table t = toml::parse(model_text, "<built-in model " + opt.model + ">");
  t.erase("variant");
  t.erase("expectation");
  t.insert_or_assign(
      "scenario",
      toml::table{{"name", "equiv"},
                  {"description", fmt::format("mtp-harness equiv \"{}\" \"{}\" "
                                              "--pp {} --pp-b {} --model {}",
                                              opt.layout_a, opt.layout_b, opt.pipeline_size,
                                              pp_b(opt), opt.model)}});
  toml::table& training = *t["training"].as_table();
  training.insert_or_assign("steps", opt.steps);
  if (!opt.dtype.empty()) training.insert_or_assign("dtype", opt.dtype);
  if (!opt.device.empty()) training.insert_or_assign("device", opt.device);
  toml::array variants;
  for (const auto& [name, layout, impl, pp] : {std::tuple{"A", opt.layout_a, a, opt.pipeline_size},
                                               std::tuple{"B", opt.layout_b, b, pp_b(opt)}}) {
    toml::table v{{"name", name},
                  {"implementation", config::enum_name(impl)},
                  {"layout", layout},
                  {"pp", pp},
                  {"dp", opt.data_parallel_size}};
    if (opt.context_parallel_size > 1) v.insert("cp", opt.context_parallel_size);
    if (opt.expert_parallel_size > 1) v.insert("ep", opt.expert_parallel_size);
    if (!opt.schedule.empty()) v.insert("schedule", opt.schedule);
    variants.push_back(std::move(v));
  }
  t.insert_or_assign("variant", std::move(variants));
  toml::array groups;
  for (record::Group g : {record::Group::kBatch, record::Group::kLoss, record::Group::kGrad,
                          record::Group::kWeight}) {
    groups.push_back(record::group_name(g));
  }
  if (opt.dtype == "bfloat16" ||
      (opt.dtype.empty() && t["training"]["dtype"].value_or(std::string()) == "bfloat16")) {
    groups.push_back(record::group_name(record::Group::kModelWeight));
  }
  toml::array expectations;
  expectations.push_back(
      toml::table{{"name", "equivalent"},
                  {"variants", toml::array{"A", "B"}},
                  {"class", "bitwise"},
                  {"records", std::move(groups)},
                  {"why", "mtp-harness equiv: are the two layouts bitwise equivalent?"}});
  t.insert_or_assign("expectation", std::move(expectations));
  std::ostringstream out;
  out << "# Generated by mtp-harness equiv.\n" << toml::toml_formatter{t} << "\n";
  return out.str();
}

constexpr const char* kGeneratedSource = "<mtp-harness equiv>";

/// `message` with a position in the scenario equiv generated ("<mtp-harness equiv>:38:1: …",
/// text the user never sees) replaced by the options that line came from.
std::string locate_in_options(const std::string& message, const std::string& text,
                              const EquivOptions& opt) {
  const std::string prefix = std::string(kGeneratedSource) + ":";
  const size_t at = message.find(prefix);
  if (at == std::string::npos) return message;
  size_t end = at + prefix.size();
  int line = 0;
  while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) {
    line = line * 10 + (message[end++] - '0');
    if (line > 1000000) break;
  }
  if (end < message.size() && message[end] == ':') {  // the column
    ++end;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
  }
  // The table the line belongs to: the last header at or above it.
  std::istringstream in(text);
  std::string l, table;
  int variants = 0;
  for (int n = 1; n <= line && std::getline(in, l); ++n) {
    if (l.rfind("[[variant]]", 0) == 0) ++variants;
    if (!l.empty() && l[0] == '[') table = l;
  }
  std::string from;
  if (table == "[[variant]]" && variants >= 1 && variants <= 2) {
    const bool a = variants == 1;
    from = fmt::format("layout {} \"{}\" (P = {})", a ? "A" : "B", a ? opt.layout_a : opt.layout_b,
                       a || opt.pipeline_size_b == 0 ? opt.pipeline_size : opt.pipeline_size_b);
  } else if (table == "[training]") {
    from = "the training options (--steps, --dtype, --device, --dp)";
  } else {
    from = fmt::format("the options (--model {})", opt.model);
  }
  return message.substr(0, at) + "equiv: " + from + message.substr(end);
}

}  // namespace

int run_equiv(const EquivOptions& opt) {
  const char* model_text = scenarios::builtin_model_text(opt.model);
  if (model_text == nullptr) {
    throw InputError(fmt::format("--model \"{}\": accepted {}", opt.model,
                                 fmt::join(scenarios::builtin_model_names(), ", ")));
  }
  FileRoles files;
  files.output("--json", opt.json_path);
  if (!opt.keep.empty()) {  // what --keep DIR will hold
    files.planned_output("--keep's scenario", opt.keep + "/equiv.toml");
    for (const char* v : {"A", "B"}) {
      files.planned_output(fmt::format("--keep's record of layout {}", v),
                           fmt::format("{}/{}.h5", opt.keep, v));
    }
  }
  const scenario::Scenario model =
      scenario::parse_scenario(model_text, "<built-in model " + opt.model + ">");
  const auto [impl_a, impl_b] = implementations(opt, model);
  const std::string text = equiv_scenario_text(opt, model_text, impl_a, impl_b);
  scenario::Scenario sc;
  std::vector<engine::RunPlan> plans;
  try {
    sc = scenario::parse_scenario(text, kGeneratedSource);
    plans = plan_variants(sc, {});
  } catch (const InputError& e) {
    throw InputError(locate_in_options(e.what(), text, opt));
  }
  std::unique_ptr<TempDirectory> tmp;
  if (opt.keep.empty()) tmp = std::make_unique<TempDirectory>("mtp-harness-equiv");
  RunSettings s;
  s.out_dir = opt.keep.empty() ? tmp->path() : run_directory(sc, opt.keep, "--keep");
  if (!opt.keep.empty()) write_file_atomically(s.out_dir + "/equiv.toml", text);
  s.progress = !opt.quiet && stderr_is_terminal();
  s.announce_long_runs = !opt.quiet;
  s.print_rows = false;
  for (size_t i = 0; i < plans.size(); ++i) {
    const engine::RunPlan& p = plans[i];
    std::cout << fmt::format("# {}: {} {} (P {}, V {}, DP {}{}, {}) — model {}, {} steps, {}\n",
                             p.variant.name, config::enum_name(p.variant.implementation),
                             p.layout.text, p.layout.pipeline_size, p.layout.virtual_size,
                             p.data_parallel_size(), p.extra_parallel_sizes(),
                             schedule::schedule_kind_name(p.schedule.kind), opt.model,
                             p.training.steps, config::enum_name(p.training.dtype));
  }
  ScenarioRun run;
  try {
    run = train_variants(sc, plans, s);
  } catch (const InputError& e) {
    throw InputError(locate_in_options(e.what(), text, opt));
  }
  const report::ExpectationResult r = evaluate_expectations(sc, run).front();
  const report::PairResult& p = r.pairs.front();
  const compare::CompareResult& c = p.result;
  if (p.holds) {
    std::cout << fmt::format(
        "EQUAL (bitwise): A and B agree in the batch, every loss, every "
        "grad and weight ({} tensors) at every step\n",
        c.tensors.size());
  } else {
    // format_report's first line says DIFFERENT (bitwise) with both layouts.
    std::cout << compare::format_report(c, opt.layout_a, opt.layout_b);
    if (c.first_divergence) {
      const auto it = p.owners.find(c.first_divergence->name);
      if (it != p.owners.end() && it->second.stage >= 0) {
        std::cout << fmt::format("# {}/{} is owned by {} in A\n", c.first_divergence->group,
                                 c.first_divergence->name, it->second.describe());
      }
    }
  }
  if (!opt.keep.empty()) {
    std::cout << fmt::format("# records and the scenario (equiv.toml) kept in {}\n", s.out_dir);
  }
  if (!opt.json_path.empty()) {
    nlohmann::json j{{"schema_version", compare::kCompareJsonSchemaVersion},
                     {"a",
                      {{"layout", opt.layout_a},
                       {"implementation", config::enum_name(impl_a)},
                       {"schedule", schedule::schedule_kind_name(plans[0].schedule.kind)}}},
                     {"b",
                      {{"layout", opt.layout_b},
                       {"implementation", config::enum_name(impl_b)},
                       {"schedule", schedule::schedule_kind_name(plans[1].schedule.kind)}}},
                     {"pp", opt.pipeline_size},
                     {"dp", plans[0].data_parallel_size()},
                     {"cp", plans[0].context_parallel_size()},
                     {"ep", plans[0].expert_parallel_size()},
                     {"dtype", config::enum_name(plans[0].training.dtype)},
                     {"pp_b", pp_b(opt)},
                     {"model", opt.model},
                     {"steps", opt.steps},
                     {"equal", p.holds},
                     {"comparison", compare::to_json(c)}};
    write_file_atomically(opt.json_path,
                          j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  return p.holds ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
