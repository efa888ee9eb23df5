// check_record, evaluate_oracle_expectation: records against the float64 straight-line program
// (record_check.h).

#include "harness/oracle/check/record_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <variant>

#include "harness/common/glob.h"
#include "harness/common/utf8.h"
#include "harness/compare/tensor_compare.h"
#include "harness/config/param_specs.h"
#include "harness/engine/weights_import.h"
#include "harness/oracle/oracle.h"
#include "harness/record/named_tensors.h"
#include "harness/record/schema.h"
#include "harness/replay/record_run.h"

namespace mtp::oracle {
namespace {

using record::Group;
using record::kGradNormAttr;

/// The record's integer attribute `key`, or `absent` when it has none (or not an integer, or
/// outside [1, 2^20]: then the oracle takes the exact scale).
int64_t int_attr_or(const record::RecordReader& rec, const char* key, int64_t absent) {
  const record::AttrMap attrs = rec.attrs();
  const auto it = attrs.find(key);
  if (it == attrs.end() || !std::holds_alternative<int64_t>(it->second)) return absent;
  const int64_t v = std::get<int64_t>(it->second);
  return v >= 1 && v <= (int64_t{1} << 20) ? v : absent;
}

/// Batch tensor `index` (tokens, labels, loss_mask) of `step`: integers of shape [K, b, s], each
/// in [0, limit) (token ids and labels below the vocabulary, the mask 0 or 1); RecordError
/// naming the tensor and the first element that is not.
at::Tensor read_batch(const record::RecordReader& rec, int step, size_t index,
                      const config::ModelConfig& m, int64_t limit) {
  const std::string name = record::kBatchTensorNames[index];
  const record::TensorData d = rec.read(step, Group::kBatch, name);
  const std::string where = fmt::format("{}: step {} batch/{}", rec.path(), step, name);
  if (record::dtype_is_float(d.dtype)) {
    throw record::RecordError(
        fmt::format("{} is {}; a batch holds integers", where, record::dtype_name(d.dtype)));
  }
  if (d.shape.size() != 3 || d.shape[1] != m.micro_batch_size || d.shape[2] != m.seq_length) {
    throw record::RecordError(fmt::format("{} has shape [{}], expected [K, {}, {}]", where,
                                          fmt::join(d.shape, ", "), m.micro_batch_size,
                                          m.seq_length));
  }
  const at::Tensor t = engine::tensor_from_record(d).to(at::kLong);
  const at::Tensor bad = ((t < 0) | (t >= limit)).reshape({-1});
  if (bad.any().item<bool>()) {
    const int64_t i = bad.to(at::kByte).argmax().item<int64_t>();
    throw record::RecordError(fmt::format("{}: element {} is {}, outside [0, {})", where, i,
                                          t.reshape({-1})[i].item<int64_t>(), limit));
  }
  return t;
}

/// `t` as float64 TensorData of its shape, named `name`.
record::TensorData as_f64(const std::string& name, const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous();
  std::vector<double> v(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  return record::TensorData::from_f64(name, c.sizes().vec(), v);
}

/// The record's value (A) against the oracle's (B) under rel_l2, as compare reports a tensor.
compare::TensorDiff diff_of(int step, Group g, const std::string& name, const at::Tensor& got,
                            const at::Tensor& want, const compare::CompareClass& cls) {
  compare::TensorDiff d;
  d.step = step;
  d.group = record::group_name(g);
  d.name = name;
  compare::compare_values(as_f64(name, got), as_f64(name, want), cls, d);
  return d;
}

void add(compare::CompareResult& r, compare::TensorDiff d) {
  if (d.failed() && !r.first_divergence) r.first_divergence = d;
  ++r.tensors_compared;
  r.tensors.push_back(std::move(d));
}

void finish(compare::CompareResult& r) {
  r.equal = std::none_of(r.tensors.begin(), r.tensors.end(),
                         [](const compare::TensorDiff& d) { return d.failed(); });
}

/// The tensors of `step` the oracle needs, held as digests only ("step 0 weight/x").
std::vector<std::string> digest_only_tensors(const record::RecordReader& rec, int step,
                                             Group weights_group) {
  std::vector<std::string> out;
  for (const auto& [s, g] : {std::pair{step - 1, weights_group}, std::pair{step, Group::kBatch},
                             std::pair{step, Group::kLoss}, std::pair{step, Group::kGrad}}) {
    if (!rec.has_group(s, g)) {
      throw record::RecordError(fmt::format(
          "{}: step {} has no {} group (the oracle needs the weights of step {} and the batch, "
          "losses and grads of step {})",
          rec.path(), s, record::group_name(g), step - 1, step));
    }
    for (const auto& name : rec.names(s, g)) {
      if (!rec.info(s, record::group_name(g), name).stored) {
        out.push_back(fmt::format("step {} {}/{}", s, record::group_name(g), name));
      }
    }
  }
  return out;
}

/// Losses of `step`: exactly lm, mtp_1..mtp_D, total, each a float scalar (else RecordError).
void check_loss_names(const record::RecordReader& rec, int step, const config::ModelConfig& m) {
  std::vector<std::string> have = rec.names(step, Group::kLoss);
  std::vector<std::string> want = record::loss_names(m.mtp_num_layers);
  std::sort(have.begin(), have.end());
  std::sort(want.begin(), want.end());
  if (have != want) {
    throw record::RecordError(fmt::format(
        "{}: step {} holds the losses {{{}}}; a model with mtp_num_layers = {} records {{{}}}",
        rec.path(), step, printable(fmt::format("{}", fmt::join(have, ", "))), m.mtp_num_layers,
        fmt::join(want, ", ")));
  }
  for (const auto& name : have) {
    const auto info = rec.describe(step, Group::kLoss, name);
    if (info.numel() != 1 || !record::dtype_is_float(info.dtype)) {
      throw record::RecordError(fmt::format(
          "{}: step {} loss/{} is {} [{}]; a loss is a float scalar", rec.path(), step,
          printable(name), record::dtype_name(info.dtype), fmt::join(info.shape, ", ")));
    }
  }
}

/// The optimizer step of `step` (RecordCheck::weights): an independent float64 AdamW from the
/// record's weights (masters) of step − 1, its moments (zero before step 1, else the recorded
/// optimizer state of step − 1) and its own main grads of step, clipped as the run clips (the
/// coefficient from those grads' float64 norm). A step whose state before it is unknown is
/// noted, not checked.
void check_optimizer_step(const record::RecordReader& rec, int step,
                          const config::TrainingConfig& t,
                          const std::vector<config::ParamSpec>& specs,
                          const std::vector<record::ExpectedTensor>& expected,
                          const std::function<bool(const std::string&)>& selected,
                          RecordCheck& out) {
  if (!rec.has_group(step, Group::kWeight) || !rec.has_group(step - 1, Group::kWeight)) {
    out.notes.push_back(
        fmt::format("step {}: the weights of steps {} and {} are not both in the "
                    "record; the optimizer step is not checked",
                    step, step - 1, step));
    return;
  }
  const record::AttrMap attrs = rec.attrs();
  for (const char* key : {"lr", "adam_beta1", "adam_beta2", "adam_eps", "weight_decay"}) {
    if (!attrs.count(key)) {
      out.notes.push_back(
          fmt::format("step {}: the record does not say its {}; the optimizer "
                      "step is not checked",
                      step, key));
      return;
    }
  }
  const bool from_zero = step == 1;
  if (!from_zero && !rec.has_group(step - 1, Group::kOptimizer)) {
    out.notes.push_back(fmt::format(
        "step {}: no optimizer state of step {} (save_optimizer_state); the optimizer step is "
        "not checked",
        step, step - 1));
    return;
  }
  std::map<std::string, at::Tensor> w0, w1, g;
  for (const auto& x : record::read_named_tensors(rec, step - 1, Group::kWeight, expected)) {
    w0[x.name] = engine::tensor_from_record(x).to(at::kDouble);
  }
  for (const auto& x : record::read_named_tensors(rec, step, Group::kWeight, expected)) {
    w1[x.name] = engine::tensor_from_record(x).to(at::kDouble);
  }
  for (const auto& x : record::read_named_tensors(rec, step, Group::kGrad, expected)) {
    g[x.name] = engine::tensor_from_record(x).to(at::kDouble);
  }
  double coeff = 1.0;  // global-norm clipping (clip_grad_norm_): each parameter counted once
  if (t.clip_grad > 0.0) {
    double sumsq = 0.0;
    for (const auto& spec : specs) sumsq += (g[spec.name] * g[spec.name]).sum().item<double>();
    coeff = std::min(t.clip_grad / (std::sqrt(sumsq) + 1e-6), 1.0);
  }
  double n = 1.0;  // the step count after this step
  if (!from_zero) {
    n = engine::tensor_from_record(
            rec.read(step - 1, Group::kOptimizer, record::kOptimizerStepName))
            .item<double>() +
        1.0;
  }
  for (const auto& spec : specs) {
    if (!selected(spec.name)) continue;
    at::Tensor m = at::zeros_like(w0[spec.name]), v = at::zeros_like(w0[spec.name]);
    if (!from_zero) {
      m = engine::tensor_from_record(
              rec.read(step - 1, Group::kOptimizer, record::exp_avg_name(spec.name)))
              .to(at::kDouble);
      v = engine::tensor_from_record(
              rec.read(step - 1, Group::kOptimizer, record::exp_avg_sq_name(spec.name)))
              .to(at::kDouble);
    }
    // torch.optim.AdamW: m, v updated; bias-corrected; decoupled weight decay.
    const at::Tensor grad = g[spec.name] * coeff;
    m = t.adam_beta1 * m + (1.0 - t.adam_beta1) * grad;
    v = t.adam_beta2 * v + (1.0 - t.adam_beta2) * grad * grad;
    const at::Tensor m_hat = m / (1.0 - std::pow(t.adam_beta1, n));
    const at::Tensor v_hat = v / (1.0 - std::pow(t.adam_beta2, n));
    const at::Tensor want =
        w0[spec.name] * (1.0 - t.lr * t.weight_decay) - t.lr * m_hat / (v_hat.sqrt() + t.adam_eps);
    add(out.weights,
        diff_of(step, Group::kWeight, spec.name, w1[spec.name], want, out.weights.cls));
  }
}

}  // namespace

Bounds dtype_bounds(record::DType model_dtype) {
  const double f32 = std::ldexp(1.0, 9 - 23), f64 = std::ldexp(1.0, 19 - 52);
  switch (model_dtype) {
    case record::DType::kF64:
      return {f64, f64, f64};
    case record::DType::kBF16:
      return {std::ldexp(1.0, -1 - 7), std::ldexp(1.0, 4 - 7), f32};
    default:
      return {f32, f32, f32};
  }
}

RecordCheck check_record(const record::RecordReader& rec, const CheckRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  if (req.bound && !(std::isfinite(*req.bound) && *req.bound > 0.0)) {
    throw InputError(fmt::format("oracle bound {} must be finite and > 0", *req.bound));
  }
  if (req.steps.empty() || *req.steps.begin() < 1) {
    throw InputError(
        "the oracle checks training steps: every step must be ≥ 1 (step n is computed from the "
        "weights of step n − 1)");
  }
  const std::vector<int> steps = rec.steps();
  for (int step : req.steps) {
    for (int s : {step - 1, step}) {
      if (!std::binary_search(steps.begin(), steps.end(), s)) {
        throw InputError(
            fmt::format("{}: has no step {} (oracle step {} needs steps {} and {}; "
                        "its steps: {})",
                        rec.path(), s, step, step - 1, step, fmt::join(steps, " ")));
      }
    }
  }
  RecordCheck out;
  const int first = *req.steps.begin();
  const replay::RecordRun run = replay::read_record_run(rec, {first, first}, false);
  const config::ModelConfig& model = run.model;
  out.notes = run.notes;
  if (run.variant.inject) {
    out.notes.push_back(fmt::format(
        "the record was made with a planted bug, inject = \"{}\" ({}): the oracle does not plant "
        "it",
        config::enum_name(*run.variant.inject), config::fault_info(*run.variant.inject).what));
  }
  // What the model computed with: the bf16 model weights of a bf16 run, else the weights.
  const Group weights_group =
      rec.has_group(first - 1, Group::kModelWeight) ? Group::kModelWeight : Group::kWeight;
  for (int step : req.steps) {
    for (auto& d : digest_only_tensors(rec, step, weights_group)) {
      out.digest_only.push_back(std::move(d));
    }
    if (req.weights) {  // the optimizer step reads the weights (masters) of both steps in full
      for (int s : {step - 1, step}) {
        if (!rec.has_group(s, Group::kWeight)) continue;
        for (const auto& name : rec.names(s, Group::kWeight)) {
          if (!rec.info(s, record::group_name(Group::kWeight), name).stored) {
            out.digest_only.push_back(fmt::format("step {} weight/{}", s, name));
          }
        }
      }
    }
  }
  out.model_dtype = rec.describe(first - 1, weights_group, config::kWordEmbeddingName).dtype;
  out.bounds =
      req.bound ? Bounds{*req.bound, *req.bound, *req.bound} : dtype_bounds(out.model_dtype);
  compare::CompareClass loss_cls, grad_cls, weight_cls;
  loss_cls.kind = grad_cls.kind = weight_cls.kind = compare::CompareClass::Kind::kRelL2;
  loss_cls.max_rel_l2 = out.bounds.loss;
  grad_cls.max_rel_l2 = out.bounds.grad;
  weight_cls.max_rel_l2 = out.bounds.weight;
  out.losses.cls = loss_cls;
  out.grads.cls = grad_cls;
  out.weights.cls = weight_cls;
  auto selected = [&](const std::string& name) {
    return glob_match_any(req.include, name) && !glob_match_any(req.exclude, name);
  };
  if (!out.digest_only.empty()) {
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }
  const std::vector<config::ParamSpec> specs = config::parameter_specs(model);
  std::vector<record::ExpectedTensor> expected;
  for (const auto& spec : specs) expected.push_back({spec.name, spec.shape});
  for (int step : req.steps) {
    StepInputs in;
    in.model = model;
    // Exactly the model's parameters, each of its shape and a float dtype (else RecordError).
    for (const auto& t : record::read_named_tensors(rec, step - 1, weights_group, expected)) {
      in.weights[t.name] = engine::tensor_from_record(t);
    }
    in.tokens = read_batch(rec, step, 0, model, model.vocab_size);
    in.labels = read_batch(rec, step, 1, model, model.vocab_size);
    in.loss_mask = read_batch(rec, step, 2, model, 2);
    in.num_microbatches = int_attr_or(rec, "M", 0);
    in.context_parallel_size = int_attr_or(rec, "context_parallel_size", 1);
    check_loss_names(rec, step, model);
    std::map<std::string, at::Tensor> grads;
    for (const auto& t : record::read_named_tensors(rec, step, Group::kGrad, expected)) {
      grads[t.name] = engine::tensor_from_record(t);
    }
    const StepResult o = straight_line_step(in);
    if (req.losses) {
      auto loss = [&](const std::string& name, double want) {
        const double got =
            engine::tensor_from_record(rec.read(step, Group::kLoss, name)).item<double>();
        out.loss_values.push_back({step, name, got, want});
        if (!selected(name)) return;
        add(out.losses, diff_of(step, Group::kLoss, name, at::full({}, got, at::kDouble),
                                at::full({}, want, at::kDouble), loss_cls));
      };
      loss(record::kLmLossName, o.lm);
      for (size_t k = 0; k < o.mtp.size(); ++k) {
        loss(record::mtp_loss_name(static_cast<int64_t>(k) + 1), o.mtp[k]);
      }
      loss(record::kTotalLossName, o.total);
    }
    if (req.grads) {
      for (const auto& spec : specs) {
        if (!selected(spec.name)) continue;
        add(out.grads, diff_of(step, Group::kGrad, spec.name, grads.at(spec.name),
                               o.grads.at(spec.name), grad_cls));
      }
      // With clipping on the record holds the global norm the clip used (grad_clip.cc): it must
      // be the norm of the oracle's grads, each parameter once.
      const record::AttrMap attrs = rec.step_attrs(step);
      if (const auto it = attrs.find(kGradNormAttr); it != attrs.end() && selected(kGradNormAttr)) {
        const double* got = std::get_if<double>(&it->second);
        if (got == nullptr) {
          throw record::RecordError(fmt::format("{}: step {} attribute {} is not a float",
                                                rec.path(), step, kGradNormAttr));
        }
        double sumsq = 0.0;
        for (const auto& spec : specs) {
          const at::Tensor& g = o.grads.at(spec.name);
          sumsq += (g * g).sum().item<double>();
        }
        compare::TensorDiff d =
            diff_of(step, Group::kGrad, kGradNormAttr, at::full({}, *got, at::kDouble),
                    at::full({}, std::sqrt(sumsq), at::kDouble), grad_cls);
        d.group = "attr";
        add(out.grads, std::move(d));
      }
    }
    if (req.weights) check_optimizer_step(rec, step, run.training, specs, expected, selected, out);
  }
  finish(out.losses);
  finish(out.grads);
  finish(out.weights);
  if (out.losses.tensors.empty() && out.grads.tensors.empty()) {
    throw InputError(
        fmt::format("{}: the oracle's selection (include {}; exclude {}) matches no loss or grad",
                    rec.path(), fmt::join(req.include, ","), fmt::join(req.exclude, ",")));
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

report::ExpectationResult evaluate_oracle_expectation(
    const scenario::Expectation& e, const std::map<std::string, std::string>& record_paths) {
  report::ExpectationResult out;
  out.expectation = &e;
  out.holds = true;
  const auto& groups = e.selection.groups;
  auto wants = [&](Group g) {
    return std::find(groups.begin(), groups.end(), record::group_name(g)) != groups.end();
  };
  const bool losses = wants(Group::kLoss), grads = wants(Group::kGrad),
             weights = wants(Group::kWeight);
  for (const std::string& variant : e.variants) {
    const record::RecordReader rec(record_paths.at(variant));
    CheckRequest req;
    req.losses = losses;
    req.grads = grads;
    req.weights = weights;
    req.include = e.selection.include;
    req.exclude = e.selection.exclude;
    if (!e.selection.steps.empty()) {
      req.steps = e.selection.steps;
    } else {  // "all": every training step the record holds
      req.steps.clear();
      for (int s : rec.steps()) {
        if (s >= 1) req.steps.insert(s);
      }
    }
    const RecordCheck c = check_record(rec, req);
    std::string nonfinite;
    if (!e.allow_nonfinite) {
      if (const auto nf = rec.first_nonfinite()) nonfinite = variant + ": " + nf->describe();
    }
    auto pair = [&](Group g, const compare::CompareResult& r) {
      report::PairResult p;
      p.baseline = variant;
      p.other = fmt::format("oracle/{}", record::group_name(g));
      p.result = r;
      p.seconds = c.seconds / static_cast<double>(int{losses} + int{grads} + int{weights});
      p.holds = !c.undecided() && r.equal;
      if (c.undecided()) {
        p.undecided = true;
        p.undecided_reason = fmt::format(
            "the record holds only digests of {} tensor(s) the oracle needs, first {} (record "
            "the run with --dump-steps or --record full)",
            c.digest_only.size(), c.digest_only.front());
      }
      if (!nonfinite.empty()) {
        p.nonfinite = nonfinite;
        p.holds = false;
        p.undecided = false;
      }
      for (const auto& t : r.tensors) {
        if (t.failed() && !p.owners.count(t.name)) p.owners[t.name] = report::owner_of(rec, t.name);
      }
      out.holds = out.holds && p.holds;
      out.pairs.push_back(std::move(p));
    };
    if (losses) pair(Group::kLoss, c.losses);
    if (grads) pair(Group::kGrad, c.grads);
    // The optimizer step, where some step's could be checked (the notes say where not).
    if (weights && (!c.weights.tensors.empty() || c.undecided())) pair(Group::kWeight, c.weights);
  }
  const bool any_failed = std::any_of(out.pairs.begin(), out.pairs.end(),
                                      [](const auto& p) { return !p.holds && !p.undecided; });
  const bool any_undecided =
      std::any_of(out.pairs.begin(), out.pairs.end(), [](const auto& p) { return p.undecided; });
  if (any_undecided && !any_failed) {
    out.skipped = true;
    out.undecided = true;
  }
  return out;
}

}  // namespace mtp::oracle
