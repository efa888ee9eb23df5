#include "harness/engine/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/common/error.h"
#include "harness/config/param_specs.h"
#include "harness/data/token_source.h"
#include "harness/engine/dtypes.h"
#include "harness/engine/weights_import.h"
#include "harness/record/named_tensors.h"

namespace mtp::engine {
namespace {

std::string where(const record::RecordReader& rec, int step, record::Group group) {
  return fmt::format("{}: steps/{}/{}", rec.path(), record::step_group_name(step),
                     record::group_name(group));
}

/// Throws RecordError unless /steps/<step> of `rec` has `group`; `why` says what it is for.
void require_group(const record::RecordReader& rec, int step, record::Group group,
                   const std::string& why) {
  const std::vector<int> steps = rec.steps();
  if (!std::binary_search(steps.begin(), steps.end(), step)) {
    throw record::RecordError(fmt::format("{}: has no step {} ({}; its steps: {})", rec.path(),
                                          step, why, fmt::join(steps, " ")));
  }
  if (!rec.has_group(step, group)) {
    throw record::RecordError(fmt::format("{}: has no group '{}' ({}; the step has: {})",
                                          where(rec, step, group), record::group_name(group), why,
                                          fmt::join(rec.groups(step), ", ")));
  }
}

/// Throws RecordError unless every weight of `weights` is stored in `dtype` at `step` of `rec`.
void require_weight_dtype(const record::RecordReader& rec, int step, const InitialWeights& w,
                          at::ScalarType dtype) {
  for (const auto& s : w.specs) {
    const record::DType d = rec.describe(step, record::Group::kWeight, s.name).dtype;
    if (d != record_dtype(dtype)) {
      throw record::RecordError(fmt::format(
          "{}/{}: dtype {}, but the run trains in {}: resuming must continue the same numbers "
          "(use init_from to start a new run from these weights)",
          where(rec, step, record::Group::kWeight), s.name, record::dtype_name(d),
          record::dtype_name(record_dtype(dtype))));
    }
  }
}

/// Throws RecordError naming `where/name`, the first bad element's flat index and value, unless
/// every element of `t` is finite (and, with `non_negative`, ≥ 0: Adam's second moment is a sum
/// of squares, so a negative one is a corrupt state, and sqrt of it would be NaN).
void require_valid_state(const at::Tensor& t, const std::string& where, const std::string& name,
                         bool non_negative, const std::string& why) {
  at::Tensor bad = at::logical_not(at::isfinite(t));
  if (non_negative) bad = at::logical_or(bad, t < 0);
  bad = bad.reshape({-1});
  if (!bad.any().item<bool>()) return;
  const int64_t i = bad.to(at::kByte).argmax().item<int64_t>();
  const int64_t count = bad.sum().item<int64_t>();
  throw record::RecordError(
      fmt::format("{}/{}: element {} is {} ({} of {} elements {}): {}", where, name, i,
                  t.reshape({-1})[i].to(at::kDouble).item<double>(), count, t.numel(),
                  non_negative ? "not finite or negative" : "not finite", why));
}

}  // namespace

size_t OptimizerCheckpoint::index_of(const std::string& name) const {
  const auto it = std::find(names.begin(), names.end(), name);
  MTP_INTERNAL_ASSERT(it != names.end(), fmt::format("no optimizer state for {}", name));
  return static_cast<size_t>(it - names.begin());
}

OptimizerCheckpoint read_optimizer_state(const record::RecordReader& rec, int step,
                                         const config::ModelConfig& cfg, at::ScalarType dtype) {
  require_group(rec, step, record::Group::kOptimizer,
                "resuming needs the optimizer state of the step: record the run with "
                "[training] save_optimizer_state = true or --save-optimizer-state");
  const std::vector<config::ParamSpec> specs = config::parameter_specs(cfg);
  std::vector<record::ExpectedTensor> expected{{kOptimizerStepName, {}}};
  for (const auto& s : specs) expected.push_back({exp_avg_name(s.name), s.shape});
  for (const auto& s : specs) expected.push_back({exp_avg_sq_name(s.name), s.shape});
  const std::vector<record::TensorData> t =
      record::read_named_tensors(rec, step, record::Group::kOptimizer, expected);
  const double count = tensor_from_record(t[0]).to(at::kDouble).item<double>();
  if (count != static_cast<double>(step)) {
    throw record::RecordError(fmt::format(
        "{}/{}: {} Adam updates recorded at step {} (expected "
        "{})",
        where(rec, step, record::Group::kOptimizer), kOptimizerStepName, count, step, step));
  }
  OptimizerCheckpoint ck;
  ck.step = step;
  for (size_t i = 0; i < specs.size(); ++i) {
    for (const record::TensorData* d : {&t[1 + i], &t[1 + specs.size() + i]}) {
      if (d->dtype != record_dtype(dtype)) {
        throw record::RecordError(fmt::format(
            "{}/{}: dtype {}, but the run trains in {}: the optimizer state must be restored "
            "without rounding",
            where(rec, step, record::Group::kOptimizer), d->name, record::dtype_name(d->dtype),
            record::dtype_name(record_dtype(dtype))));
      }
    }
    ck.names.push_back(specs[i].name);
    ck.exp_avg.push_back(tensor_from_record(t[1 + i]));
    ck.exp_avg_sq.push_back(tensor_from_record(t[1 + specs.size() + i]));
    const std::string at = where(rec, step, record::Group::kOptimizer);
    const char* why = "an impossible Adam state; resuming from it would train on garbage";
    require_valid_state(ck.exp_avg.back(), at, t[1 + i].name, false, why);
    require_valid_state(ck.exp_avg_sq.back(), at, t[1 + specs.size() + i].name, true, why);
  }
  return ck;
}

record::AttrMap StartState::attrs() const {
  if (!origin) return {};
  const std::string key = resumed ? "resumed_from" : "init_from";
  return {{key, origin->path}, {key + "_step", origin->step}, {key + "_sha256", origin->sha256}};
}

StartState load_start_state(const RunPlan& plan) {
  const config::TrainingConfig& t = plan.training;
  StartState s;
  if (!t.resume_from && !t.init_from) {
    s.weights = make_initial_weights(plan.model, t.seed);
    return s;
  }
  const config::RecordRef& ref = t.resume_from ? *t.resume_from : *t.init_from;
  const record::RecordReader rec(ref.path);
  const int step = static_cast<int>(ref.step);
  require_group(rec, step, record::Group::kWeight,
                t.resume_from ? "--resume takes the weights of that step"
                              : "init_from takes the weights of that step");
  s.weights = initial_weights_from_record(rec, step, plan.model);
  for (size_t i = 0; i < s.weights.specs.size(); ++i) {
    require_valid_state(s.weights.values[i], where(rec, step, record::Group::kWeight),
                        s.weights.specs[i].name, false,
                        "training from non-finite weights gives non-finite losses");
  }
  s.origin = RecordOrigin{ref.path, ref.step, data::sha256_file(ref.path, "record")};
  if (t.resume_from) {
    s.resumed = true;
    s.step = ref.step;
    // bf16 runs record fp32 masters in the weight group and fp32 Adam moments: resume from those.
    const at::ScalarType dtype = main_type(t.dtype);
    require_weight_dtype(rec, step, s.weights, dtype);
    if (step > 0) s.optimizer = read_optimizer_state(rec, step, plan.model, dtype);
  }
  return s;
}

}  // namespace mtp::engine
