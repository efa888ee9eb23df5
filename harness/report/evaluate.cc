// evaluate, skipped, owner_of, read_losses: the expectations' verdicts and the facts the
// renderings need from the records (report.h).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "harness/common/glob.h"
#include "harness/common/json_input.h"
#include "harness/report/report.h"

namespace mtp::report {

std::string StageOwner::describe() const {
  if (stage < 0) return "";
  return fmt::format("stage {} (pipeline rank {}, virtual stage {})", stage, pipeline_rank,
                     virtual_stage);
}

StageOwner owner_of(const record::RecordReader& r, const std::string& name) {
  const record::AttrMap attrs = r.attrs();
  const auto stages_it = attrs.find("param_stages");
  const auto coords_it = attrs.find("stage_coords");
  if (stages_it == attrs.end() || coords_it == attrs.end()) return {};
  const auto* stages_text = std::get_if<std::string>(&stages_it->second);
  const auto* coords_text = std::get_if<std::string>(&coords_it->second);
  auto bad = [&](const char* key) {
    return record::RecordError(
        fmt::format("{}: root attribute '{}' is not the JSON the harness writes", r.path(), key));
  };
  if (stages_text == nullptr) throw bad("param_stages");
  if (coords_text == nullptr) throw bad("stage_coords");
  // Bounded depth and positioned errors (common/json_input.h); not JSON is the harness's JSON
  // broken like any other.
  auto parse = [&](const std::string& text, const char* key) {
    try {
      return parse_json(text, fmt::format("{}: root attribute '{}'", r.path(), key));
    } catch (const InputError& e) {
      throw record::RecordError(e.what());
    }
  };
  const nlohmann::json stages = parse(*stages_text, "param_stages");
  const nlohmann::json coords = parse(*coords_text, "stage_coords");
  if (!stages.is_object()) throw bad("param_stages");
  if (!coords.is_array()) throw bad("stage_coords");
  const auto it = stages.find(name);
  if (it == stages.end()) return {};
  // A non-negative integer below `bound`, else -1 (no narrowing of a huge number to a small one).
  auto index = [](const nlohmann::json& v, uint64_t bound) -> int {
    if (!v.is_number_unsigned() || v.get<uint64_t>() >= bound) return -1;
    return static_cast<int>(v.get<uint64_t>());
  };
  if (!it->is_array() || it->empty()) throw bad("param_stages");
  StageOwner o;
  o.stage = index((*it)[0], std::min<uint64_t>(coords.size(), 1u << 20));
  if (o.stage < 0) throw bad("param_stages");
  const nlohmann::json& c = coords[static_cast<size_t>(o.stage)];
  if (!c.is_array() || c.size() != 2) throw bad("stage_coords");
  o.pipeline_rank = index(c[0], 1u << 20);
  o.virtual_stage = index(c[1], 1u << 20);
  if (o.pipeline_rank < 0 || o.virtual_stage < 0) throw bad("stage_coords");
  return o;
}

std::string ExpectationResult::skip_reason() const {
  if (!missing.empty()) {
    return fmt::format("not evaluated: variant(s) {} not run", fmt::join(missing, ", "));
  }
  for (const auto& p : pairs) {
    if (p.undecided) return "undecided: " + pair_verdict(p);
  }
  return "";
}

std::string pair_verdict(const PairResult& p) {
  const compare::CompareResult& r = p.result;
  std::string s;
  if (!p.verdict.empty()) {
    s = p.verdict;
  } else if (!p.nonfinite.empty()) {
    s = "non-finite value in " + p.nonfinite;
  } else if (!p.undecided_reason.empty()) {
    s = "UNDECIDED: " + p.undecided_reason;
  } else {
    s = compare::verdict_text(r);
    if (r.first_divergence && !r.undecided()) {
      const auto it = p.owners.find(r.first_divergence->name);
      if (it != p.owners.end() && it->second.stage >= 0) s += " [" + it->second.describe() + "]";
    }
  }
  if (!p.note.empty()) s += " [" + p.note + "]";
  return s;
}

void apply_detection(const scenario::Expectation& e, ExpectationResult& r) {
  if (!e.detects || r.skipped) return;
  const std::string fault = config::enum_name(*e.detects);
  const PairResult* earliest = nullptr;
  auto step_of = [](const PairResult& p) {
    return p.result.first_divergence ? p.result.first_divergence->step : 0;
  };
  for (const PairResult& p : r.pairs) {
    if (p.holds || p.undecided) continue;
    if (earliest == nullptr || step_of(p) < step_of(*earliest)) earliest = &p;
  }
  std::string verdict;
  bool caught = false;
  if (earliest == nullptr) {
    verdict = fmt::format("the fault {} went unseen: the relation holds", fault);
  } else if (!earliest->nonfinite.empty()) {
    // A NaN anywhere in a record proves nothing about this fault (the clean variant may hold
    // the same one): a detector needs a finite first divergence.
    verdict = fmt::format(
        "not a detection: a record holds a non-finite value ({}); a detector needs a finite "
        "first divergence",
        earliest->nonfinite);
  } else {
    const auto& fd = earliest->result.first_divergence;
    const std::string id = fd ? fd->group + "/" + fd->name : "(structure)";
    const int step = fd ? fd->step : 0;
    caught = (e.first_divergence.empty() || glob_match(e.first_divergence, id)) &&
             (e.first_divergence_step == 0 || step == e.first_divergence_step);
    verdict = caught ? fmt::format("caught {} at step {} {} ({} vs {})", fault, step, id,
                                   earliest->baseline, earliest->other)
                     : fmt::format("the fault {} was seen first at step {} {}, expected step {} {}",
                                   fault, step, id, e.first_divergence_step,
                                   e.first_divergence.empty() ? "*" : e.first_divergence);
  }
  r.holds = caught;
  r.undecided = false;
  for (PairResult& p : r.pairs) {
    p.note = p.holds ? (caught ? "relation holds here" : verdict) : verdict;
    p.holds = caught;
    p.undecided = false;
  }
}

ExpectationResult skipped(const scenario::Expectation& e, std::vector<std::string> missing) {
  ExpectationResult out;
  out.expectation = &e;
  out.skipped = true;
  out.missing = std::move(missing);
  return out;
}

ExpectationResult evaluate(const scenario::Expectation& e,
                           const std::map<std::string, std::string>& record_paths) {
  ExpectationResult out;
  out.expectation = &e;
  out.holds = true;
  record::RecordReader base(record_paths.at(e.variants[0]));
  const std::optional<record::NonFiniteValue> base_nonfinite = base.first_nonfinite();
  for (size_t i = 1; i < e.variants.size(); ++i) {
    record::RecordReader other(record_paths.at(e.variants[i]));
    PairResult p;
    p.baseline = e.variants[0];
    p.other = e.variants[i];
    const auto t0 = std::chrono::steady_clock::now();
    p.result = compare::compare_records(base, other, e.cls, e.selection);
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    p.holds = p.result.holds();
    p.undecided = p.result.undecided();
    if (!e.allow_nonfinite) {
      // NaN equals NaN bit for bit: a run that is NaN alike in both variants would pass.
      std::vector<std::string> bad;
      if (base_nonfinite) bad.push_back(p.baseline + ": " + base_nonfinite->describe());
      if (const auto nf = other.first_nonfinite()) bad.push_back(p.other + ": " + nf->describe());
      if (!bad.empty()) {
        p.nonfinite = fmt::format("{}", fmt::join(bad, "; "));
        p.holds = false;
        p.undecided = false;
      }
    }
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
    for (const auto& t : p.result.tensors) {
      if ((t.failed() || t.bit_mismatches > 0) && !p.owners.count(t.name)) {
        p.owners[t.name] = owner_of(base, t.name);
      }
    }
    out.holds = out.holds && p.holds;
    out.pairs.push_back(std::move(p));
  }
  // Undecided pairs and no failing pair: no verdict, the expectation is skipped with the reason.
  const bool any_failed = std::any_of(out.pairs.begin(), out.pairs.end(),
                                      [](const PairResult& p) { return !p.holds && !p.undecided; });
  const bool any_undecided = std::any_of(out.pairs.begin(), out.pairs.end(),
                                         [](const PairResult& p) { return p.undecided; });
  if (any_undecided && !any_failed) {
    out.skipped = true;
    out.undecided = true;
  }
  return out;
}

std::vector<StepLoss> read_losses(const record::RecordReader& r) {
  std::vector<StepLoss> out;
  auto value = [&](int step, const std::string& name) {
    const record::TensorData t = r.read(step, record::Group::kLoss, name);
    if (t.numel() != 1) {
      throw record::RecordError(fmt::format("{}: step {} loss/{} has {} elements, expected 1",
                                            r.path(), step, name, t.numel()));
    }
    switch (t.dtype) {
      case record::DType::kF64: {
        double v;
        std::memcpy(&v, t.bytes.data(), 8);
        return v;
      }
      case record::DType::kF32: {
        float v;
        std::memcpy(&v, t.bytes.data(), 4);
        return static_cast<double>(v);
      }
      default:
        throw record::RecordError(fmt::format("{}: step {} loss/{} is {}, expected a float",
                                              r.path(), step, name, record::dtype_name(t.dtype)));
    }
  };
  for (int step : r.steps()) {
    if (!r.has_group(step, record::Group::kLoss)) continue;
    StepLoss l;
    l.step = step;
    const auto names = r.names(step, record::Group::kLoss);
    for (int k = 1;; ++k) {
      const std::string n = record::mtp_loss_name(k);
      if (std::find(names.begin(), names.end(), n) == names.end()) break;
      l.mtp.push_back(value(step, n));
    }
    if (std::find(names.begin(), names.end(), record::kLmLossName) != names.end()) {
      l.lm = value(step, record::kLmLossName);
    }
    if (std::find(names.begin(), names.end(), record::kTotalLossName) != names.end()) {
      l.total = value(step, record::kTotalLossName);
    }
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace mtp::report
