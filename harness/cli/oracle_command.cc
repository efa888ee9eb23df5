// File: harness/cli/oracle_command.cc
//
// mtp-harness oracle: a record's step against the straight-line float64 program
// (harness/oracle/oracle.h), which shares no code with the model, the loss or the engine.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/common/output_file.h"
#include "harness/common/utf8.h"
#include "harness/config/param_specs.h"
#include "harness/engine/weights_import.h"
#include "harness/oracle/oracle.h"
#include "harness/record/named_tensors.h"
#include "harness/record/record.h"
#include "harness/replay/record_run.h"

namespace mtp::cli {
namespace {

/// The bounds for a model computing in `model`, in units of its machine epsilon ε (2^-52,
/// 2^-23, 2^-7 for float64, float32, bfloat16), set with headroom over what every CPU scenario's
/// records measure against the oracle (README, "The float64 oracle"):
///   float64   losses and grads 2^19·ε ≈ 1.2e-10 (measured ≤ 3e-15)
///   float32   losses and grads 2^9·ε ≈ 6.1e-5   (measured ≤ 7.0e-7, MoE included)
///   bfloat16  losses 2^-1·ε ≈ 3.9e-3 (measured ≤ 3.1e-5: losses and softmax are fp32),
///             grads 2^4·ε = 0.125 (measured ≤ 0.063: every activation is rounded to bf16)
struct Bounds {
  double loss = 0.0, grad = 0.0;
};
Bounds dtype_bounds(record::DType model) {
  switch (model) {
    case record::DType::kF64:
      return {std::ldexp(1.0, 19 - 52), std::ldexp(1.0, 19 - 52)};
    case record::DType::kBF16:
      return {std::ldexp(1.0, -1 - 7), std::ldexp(1.0, 4 - 7)};
    default:
      return {std::ldexp(1.0, 9 - 23), std::ldexp(1.0, 9 - 23)};
  }
}

struct Row {
  std::string group, name;
  double error = 0.0;  ///< relative L2 (losses: relative difference)
  double bound = 0.0;
  /// The fraction of its bound the error uses (NaN: infinity).
  double used() const { return std::isnan(error) ? INFINITY : error / bound; }
  bool within() const { return error <= bound; }
};

/// Batch tensor `index` (tokens, labels, loss_mask) of `step`: integers of shape [K, b, s], each
/// in [0, limit) (token ids and labels below the vocabulary, the mask 0 or 1); RecordError
/// naming the tensor and the first element that is not.
at::Tensor read_batch(const record::RecordReader& rec, int step, size_t index,
                      const config::ModelConfig& m, int64_t limit) {
  const std::string name = record::kBatchTensorNames[index];
  const record::TensorData d = rec.read(step, record::Group::kBatch, name);
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

}  // namespace

int run_oracle(const OracleOptions& opt) {
  if (!opt.json_path.empty()) {
    check_output_file("--json", opt.json_path);
    check_not_same_file("--json", opt.json_path, "the record", opt.record);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const record::RecordReader rec(opt.record);
  const int step = opt.step;
  const std::vector<int> steps = rec.steps();
  for (int s : {step - 1, step}) {
    if (!std::binary_search(steps.begin(), steps.end(), s)) {
      throw InputError(
          fmt::format("{}: has no step {} (--step {} needs steps {} and {}; its steps: "
                      "{})",
                      opt.record, s, step, step - 1, step, fmt::join(steps, " ")));
    }
  }
  const replay::RecordRun run = replay::read_record_run(rec, {step, step}, false);
  const config::ModelConfig& model = run.model;
  // What the model computed with: the bf16 model weights of a bf16 run, else the weights.
  const record::Group weights_group = rec.has_group(step - 1, record::Group::kModelWeight)
                                          ? record::Group::kModelWeight
                                          : record::Group::kWeight;
  // Every tensor the step needs must hold its values (not only digests).
  const std::vector<config::ParamSpec> specs = config::parameter_specs(model);
  std::vector<std::string> digest_only;
  auto need_values = [&](int s, record::Group g) {
    for (const auto& name : rec.names(s, g)) {
      if (!rec.info(s, record::group_name(g), name).stored) {
        digest_only.push_back(fmt::format("step {} {}/{}", s, record::group_name(g), name));
      }
    }
  };
  for (const auto& [s, g] :
       {std::pair{step - 1, weights_group}, std::pair{step, record::Group::kBatch},
        std::pair{step, record::Group::kLoss}, std::pair{step, record::Group::kGrad}}) {
    if (!rec.has_group(s, g)) {
      throw record::RecordError(
          fmt::format("{}: step {} has no {} group (the oracle needs the "
                      "weights of step {} and the batch, losses and grads "
                      "of step {})",
                      opt.record, s, record::group_name(g), step - 1, step));
    }
    need_values(s, g);
  }
  oracle::StepInputs in;
  in.model = model;
  std::map<std::string, at::Tensor> grads;
  const record::DType model_dtype =
      rec.describe(step - 1, weights_group, config::kWordEmbeddingName).dtype;
  if (digest_only.empty()) {
    // Exactly the model's parameters, each of its shape and a float dtype (else RecordError).
    std::vector<record::ExpectedTensor> expected;
    for (const auto& spec : specs) expected.push_back({spec.name, spec.shape});
    for (const auto& t : record::read_named_tensors(rec, step - 1, weights_group, expected)) {
      in.weights[t.name] = engine::tensor_from_record(t);
    }
    for (const auto& t : record::read_named_tensors(rec, step, record::Group::kGrad, expected)) {
      grads[t.name] = engine::tensor_from_record(t).to(at::kDouble);
    }
    in.tokens = read_batch(rec, step, 0, model, model.vocab_size);
    in.labels = read_batch(rec, step, 1, model, model.vocab_size);
    in.loss_mask = read_batch(rec, step, 2, model, 2);
    std::vector<std::string> loss_names = rec.names(step, record::Group::kLoss);
    std::vector<std::string> want = record::loss_names(model.mtp_num_layers);
    std::sort(loss_names.begin(), loss_names.end());
    std::sort(want.begin(), want.end());
    if (loss_names != want) {
      throw record::RecordError(fmt::format(
          "{}: step {} holds the losses {{{}}}; a model with mtp_num_layers = {} records {{{}}}",
          opt.record, step, printable(fmt::format("{}", fmt::join(loss_names, ", "))),
          model.mtp_num_layers, fmt::join(want, ", ")));
    }
    for (const auto& name : loss_names) {
      const auto info = rec.describe(step, record::Group::kLoss, name);
      if (info.numel() != 1 || !record::dtype_is_float(info.dtype)) {
        throw record::RecordError(
            fmt::format("{}: step {} loss/{} is {} [{}]; a loss is a float "
                        "scalar",
                        opt.record, step, printable(name), record::dtype_name(info.dtype),
                        fmt::join(info.shape, ", ")));
      }
    }
  }
  const Bounds bounds = opt.bound > 0 ? Bounds{opt.bound, opt.bound} : dtype_bounds(model_dtype);
  nlohmann::json j;
  j["schema_version"] = 1;
  j["record"] = opt.record;
  j["step"] = step;
  j["model_dtype"] = record::dtype_name(model_dtype);
  j["bound"] = {{"loss", bounds.loss}, {"grad", bounds.grad}};
  std::cout << fmt::format(
      "# mtp-harness oracle {}: step {} against the float64 straight-line "
      "program (weights of step {}, model dtype {})\n",
      opt.record, step, step - 1, record::dtype_name(model_dtype));
  for (const auto& n : run.notes) std::cout << "# derived: " << n << "\n";
  if (!digest_only.empty()) {
    j["verdict"] = "UNDECIDED";
    j["digest_only"] = digest_only;
    std::cout << fmt::format(
        "# verdict: UNDECIDED: the record holds only digests of {} tensor(s), first {} (record "
        "the run with --dump-steps {},{} or --record full)\n",
        digest_only.size(), digest_only.front(), step - 1, step);
    if (!opt.json_path.empty()) write_file_atomically(opt.json_path, j.dump(2) + "\n");
    return kExitMismatch;
  }
  const oracle::StepResult o = oracle::straight_line_step(in);
  std::vector<Row> rows;
  auto loss_row = [&](const std::string& name, double want) {
    const double got =
        engine::tensor_from_record(rec.read(step, record::Group::kLoss, name)).item<double>();
    const double err =
        want != 0 ? std::fabs(got - want) / std::fabs(want) : (got == 0 ? 0.0 : INFINITY);
    rows.push_back({record::group_name(record::Group::kLoss), name, err, bounds.loss});
    j["losses"].push_back({{"name", name}, {"record", got}, {"oracle", want}, {"error", err}});
  };
  loss_row(record::kLmLossName, o.lm);
  for (size_t k = 0; k < o.mtp.size(); ++k) {
    loss_row(record::mtp_loss_name(static_cast<int64_t>(k) + 1), o.mtp[k]);
  }
  loss_row(record::kTotalLossName, o.total);
  for (const auto& spec : specs) {
    const double err = oracle::relative_l2(grads[spec.name].to(at::kDouble), o.grads.at(spec.name));
    rows.push_back({record::group_name(record::Group::kGrad), spec.name, err, bounds.grad});
    j["grads"].push_back({{"name", spec.name}, {"error", std::isfinite(err) ? err : -1.0}});
  }
  // Worst first: by the fraction of its bound used (NaN counts as the worst).
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.used() > b.used(); });
  const auto outside =
      std::count_if(rows.begin(), rows.end(), [](const Row& r) { return !r.within(); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("{:<8} {:<64} {:>12} {:>10}\n", "group", "tensor", "rel. L2", "bound");
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < opt.max_rows; ++i) {
    std::cout << fmt::format("{:<8} {:<64} {:>12.3e} {:>10.3g}{}\n", rows[i].group, rows[i].name,
                             rows[i].error, rows[i].bound, rows[i].within() ? "" : "  OUTSIDE");
  }
  const Row& worst = rows.front();
  const std::string verdict =
      outside == 0
          ? fmt::format(
                "AGREES (bounds: losses {:.3g}, grads {:.3g}): worst {}/{} at {:.3g} of "
                "{} tensors",
                bounds.loss, bounds.grad, worst.group, worst.name, worst.error, rows.size())
          : fmt::format(
                "DISAGREES (bounds: losses {:.3g}, grads {:.3g}): {} of {} tensors "
                "outside, worst step {} {}/{} at {:.3g}",
                bounds.loss, bounds.grad, outside, rows.size(), step, worst.group, worst.name,
                worst.error);
  std::cout << fmt::format("# {:.2f} s\n# verdict: {}\n", seconds, verdict);
  j["verdict"] = outside == 0 ? "AGREES" : "DISAGREES";
  j["verdict_text"] = verdict;
  j["seconds"] = seconds;
  if (!opt.json_path.empty()) write_file_atomically(opt.json_path, j.dump(2) + "\n");
  return outside == 0 ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
