// to_json: report.json (report.h).

#include "harness/compare/compare_json.h"
#include "harness/report/report.h"

namespace mtp::report {
namespace {

nlohmann::json owner_json(const StageOwner& o) {
  if (o.stage < 0) return nullptr;
  return {
      {"stage", o.stage}, {"pipeline_rank", o.pipeline_rank}, {"virtual_stage", o.virtual_stage}};
}

const char* status(const ExpectationResult& r) {
  return r.skipped ? "skipped" : r.holds ? "pass" : "fail";
}

}  // namespace

nlohmann::json to_json(const scenario::Scenario& sc, const std::vector<VariantRun>& runs,
                       const std::vector<ExpectationResult>& results) {
  nlohmann::json j;
  j["schema_version"] = kReportSchemaVersion;
  j["scenario"] = sc.name;
  j["source"] = sc.source;
  int evaluated = 0, failed = 0, skipped_count = 0;
  for (const auto& r : results) {
    if (r.skipped) {
      ++skipped_count;
      continue;
    }
    ++evaluated;
    failed += r.holds ? 0 : 1;
  }
  j["verdict"] = failed > 0 ? "fail" : evaluated == 0 ? "nothing evaluated" : "pass";
  j["counts"] = {{"expectations", results.size()},
                 {"evaluated", evaluated},
                 {"passed", evaluated - failed},
                 {"failed", failed},
                 {"skipped", skipped_count}};
  j["variants"] = nlohmann::json::array();
  for (const auto& v : runs) {
    nlohmann::json losses = nlohmann::json::array();
    for (const auto& l : v.losses) {
      losses.push_back({{"step", l.step}, {"lm", l.lm}, {"mtp", l.mtp}, {"total", l.total}});
    }
    j["variants"].push_back({{"name", v.name},
                             {"implementation", v.implementation},
                             {"layout", v.layout},
                             {"pp", v.pipeline_size},
                             {"vpp", v.virtual_size},
                             {"dp", v.data_parallel_size},
                             {"cp", v.context_parallel_size},
                             {"ep", v.expert_parallel_size},
                             {"optimizer", v.optimizer},
                             {"schedule", v.schedule},
                             {"mtp_standalone", v.mtp_standalone},
                             {"record", v.record_path},
                             {"record_bytes", v.record_bytes},
                             {"record_mode", v.record_mode},
                             {"wall_seconds", v.wall_seconds},
                             {"final_total_loss", v.final_total_loss},
                             {"losses", losses},
                             {"retrain_command", v.retrain_command}});
  }
  j["expectations"] = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json e{{"name", r.expectation->name},
                     {"class", r.expectation->class_text()},
                     {"why", r.expectation->why},
                     {"status", status(r)},
                     {"holds", r.holds},
                     {"variants", r.expectation->variants},
                     {"records", r.expectation->selection.groups}};
    if (r.skipped) {
      e["missing_variants"] = r.missing;
      e["skip_reason"] = r.skip_reason();
    }
    e["pairs"] = nlohmann::json::array();
    for (const auto& p : r.pairs) {
      nlohmann::json owners = nlohmann::json::object();
      for (const auto& [name, o] : p.owners) owners[name] = owner_json(o);
      nlohmann::json pj{{"baseline", p.baseline},
                        {"other", p.other},
                        {"holds", p.holds},
                        {"seconds", p.seconds},
                        {"comparison", compare::to_json(p.result)},
                        {"owners", owners},
                        {"verdict", pair_verdict(p)},
                        {"undecided", p.undecided}};
      if (!p.note.empty()) pj["note"] = p.note;
      if (!p.nonfinite.empty()) pj["nonfinite"] = p.nonfinite;
      e["pairs"].push_back(pj);
    }
    j["expectations"].push_back(e);
  }
  return j;
}

}  // namespace mtp::report
