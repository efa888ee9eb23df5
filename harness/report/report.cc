#include "harness/report/report.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/common/glob.h"

namespace mtp::report {
namespace {

std::string divergence_text(const compare::CompareResult& r) {
  if (!r.structural.empty()) return "structure: " + r.structural.front();
  if (!r.first_divergence) return "-";
  return r.first_divergence->describe();
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

ExpectationResult evaluate(const scenario::Expectation& e,
                           const std::map<std::string, std::string>& record_paths) {
  ExpectationResult out;
  out.expectation = &e;
  out.holds = true;
  record::RecordReader base(record_paths.at(e.variants[0]));
  for (size_t i = 1; i < e.variants.size(); ++i) {
    record::RecordReader other(record_paths.at(e.variants[i]));
    PairResult p;
    p.baseline = e.variants[0];
    p.other = e.variants[i];
    p.result = compare::compare_records(base, other, e.cls, e.selection);
    p.holds = p.result.holds();
    if (p.holds && e.cls.kind == compare::CompareClass::Kind::kDiffer &&
        (!e.first_divergence.empty() || e.first_divergence_step != 0)) {
      const auto& fd = p.result.first_divergence;
      if (!fd) {
        p.holds = false;
        p.note = "records differ only in structure; expected a first divergence at a tensor";
      } else {
        const std::string id = fd->group + "/" + fd->name;
        if (!e.first_divergence.empty() && !glob_match(e.first_divergence, id)) {
          p.holds = false;
          p.note = fmt::format("first divergence is {} at step {}, expected {}", id, fd->step,
                               e.first_divergence);
        } else if (e.first_divergence_step != 0 && fd->step != e.first_divergence_step) {
          p.holds = false;
          p.note = fmt::format("first divergence is at step {}, expected step {}", fd->step,
                               e.first_divergence_step);
        }
      }
    }
    out.holds = out.holds && p.holds;
    out.pairs.push_back(std::move(p));
  }
  return out;
}

std::string format_table(const std::vector<ExpectationResult>& results) {
  size_t wn = 11, wc = 5, wp = 24;
  for (const auto& r : results) {
    wn = std::max(wn, r.expectation->name.size());
    wc = std::max(wc, r.expectation->cls.to_string().size());
    for (const auto& p : r.pairs) wp = std::max(wp, p.baseline.size() + p.other.size() + 4);
  }
  std::string s = fmt::format("# {:<{}} {:<{}} {:<6} {:<{}} {}\n", "expectation", wn, "class", wc,
                              "result", "pair (baseline vs other)", wp, "first divergence");
  for (const auto& r : results) {
    for (size_t i = 0; i < r.pairs.size(); ++i) {
      const auto& p = r.pairs[i];
      const std::string name = i == 0 ? r.expectation->name : "";
      const std::string cls = i == 0 ? r.expectation->cls.to_string() : "";
      std::string div = divergence_text(p.result);
      if (!p.note.empty()) div += "  [" + p.note + "]";
      s += fmt::format("  {:<{}} {:<{}} {:<6} {:<{}} {}\n", name, wn, cls, wc,
                       p.holds ? "PASS" : "FAIL", p.baseline + " vs " + p.other, wp, div);
    }
  }
  return s;
}

nlohmann::json to_json(const scenario::Scenario& sc, const std::vector<VariantRun>& runs,
                       const std::vector<ExpectationResult>& results) {
  nlohmann::json j;
  j["scenario"] = sc.name;
  j["source"] = sc.source;
  bool all = true;
  for (const auto& r : results) all = all && r.holds;
  j["verdict"] = all ? "pass" : "fail";
  j["variants"] = nlohmann::json::array();
  for (const auto& v : runs) {
    j["variants"].push_back({{"name", v.name}, {"implementation", v.implementation},
                             {"layout", v.layout}, {"pp", v.pipeline_size}, {"vpp", v.virtual_size},
                             {"dp", v.data_parallel_size}, {"optimizer", v.optimizer},
                             {"schedule", v.schedule}, {"mtp_standalone", v.mtp_standalone},
                             {"record", v.record_path}, {"record_bytes", v.record_bytes},
                             {"wall_seconds", v.wall_seconds},
                             {"final_total_loss", v.final_total_loss}});
  }
  j["expectations"] = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json e{{"name", r.expectation->name}, {"class", r.expectation->cls.to_string()},
                     {"why", r.expectation->why}, {"holds", r.holds},
                     {"records", r.expectation->selection.groups}};
    e["pairs"] = nlohmann::json::array();
    for (const auto& p : r.pairs) {
      nlohmann::json pj{{"baseline", p.baseline}, {"other", p.other}, {"holds", p.holds},
                        {"records_equal", p.result.equal},
                        {"tensors_compared", p.result.tensors_compared},
                        {"structural", p.result.structural}};
      if (!p.note.empty()) pj["note"] = p.note;
      if (const auto& fd = p.result.first_divergence) {
        pj["first_divergence"] = {{"step", fd->step}, {"group", fd->group}, {"name", fd->name},
                                  {"structural", fd->structural}, {"index", fd->first_index},
                                  {"coord", fd->first_coord}, {"a", fd->a_value},
                                  {"b", fd->b_value}, {"a_bits", fd->a_bits},
                                  {"b_bits", fd->b_bits}, {"mismatches", fd->mismatches},
                                  {"numel", fd->numel}, {"max_ulp", fd->max_ulp}};
      }
      nlohmann::json failing = nlohmann::json::array();
      for (const auto& t : p.result.tensors) {
        if (!t.failed() && t.bit_mismatches == 0) continue;
        failing.push_back({{"step", t.step}, {"group", t.group}, {"name", t.name},
                           {"mismatches", t.mismatches}, {"bit_mismatches", t.bit_mismatches},
                           {"numel", t.numel}, {"max_ulp", t.max_ulp}, {"max_abs", t.max_abs},
                           {"structural", t.structural}});
      }
      pj["differing_tensors"] = failing;
      e["pairs"].push_back(pj);
    }
    j["expectations"].push_back(e);
  }
  return j;
}

std::string to_junit(const scenario::Scenario& sc, const std::vector<ExpectationResult>& results) {
  int failures = 0;
  for (const auto& r : results) failures += r.holds ? 0 : 1;
  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
      "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\">\n",
      xml_escape(sc.name), results.size(), failures);
  for (const auto& r : results) {
    s += fmt::format("    <testcase classname=\"{}\" name=\"{}\">\n", xml_escape(sc.name),
                     xml_escape(r.expectation->name));
    for (const auto& p : r.pairs) {
      if (p.holds) continue;
      std::string msg = fmt::format("{} vs {}: {}{}", p.baseline, p.other, divergence_text(p.result),
                                    p.note.empty() ? "" : " [" + p.note + "]");
      s += fmt::format("      <failure message=\"{}\">{}</failure>\n", xml_escape(msg),
                       xml_escape(compare::format_report(p.result, p.baseline, p.other)));
    }
    s += "    </testcase>\n";
  }
  s += "  </testsuite>\n</testsuites>\n";
  return s;
}

}  // namespace mtp::report
