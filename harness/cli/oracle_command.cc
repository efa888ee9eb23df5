// File: harness/cli/oracle_command.cc
//
// mtp-harness oracle: a record's step against the straight-line float64 program
// (harness/oracle/oracle.h), which shares no code with the model, the loss or the engine.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/common/output_file.h"
#include "harness/oracle/check/record_check.h"
#include "harness/record/record.h"

namespace mtp::cli {
namespace {

/// One row of the table: a loss or a grad and its error against the oracle.
struct Row {
  std::string group, name;
  double error = 0.0;  ///< relative L2 (losses: relative difference)
  double bound = 0.0;
  /// The fraction of its bound the error uses (NaN: infinity).
  double used() const { return std::isnan(error) ? INFINITY : error / bound; }
  bool within() const { return error <= bound; }
};

}  // namespace

int run_oracle(const OracleOptions& opt) {
  if (!opt.json_path.empty()) {
    check_output_file("--json", opt.json_path);
    check_not_same_file("--json", opt.json_path, "the record", opt.record);
  }
  const record::RecordReader rec(opt.record);
  const int step = opt.step;
  oracle::CheckRequest req;
  req.steps = {step};
  if (opt.bound > 0) req.bound = opt.bound;
  const oracle::RecordCheck c = oracle::check_record(rec, req);
  nlohmann::json j;
  j["schema_version"] = 1;
  j["record"] = opt.record;
  j["step"] = step;
  j["model_dtype"] = record::dtype_name(c.model_dtype);
  j["bound"] = {{"loss", c.bounds.loss}, {"grad", c.bounds.grad}, {"weight", c.bounds.weight}};
  std::cout << fmt::format(
      "# mtp-harness oracle {}: step {} against the float64 straight-line "
      "program (weights of step {}, model dtype {})\n",
      opt.record, step, step - 1, record::dtype_name(c.model_dtype));
  for (const auto& n : c.notes) std::cout << "# derived: " << n << "\n";
  if (c.undecided()) {
    j["verdict"] = "UNDECIDED";
    j["digest_only"] = c.digest_only;
    std::cout << fmt::format(
        "# verdict: UNDECIDED: the record holds only digests of {} tensor(s), first {} (record "
        "the run with --dump-steps {},{} or --record full)\n",
        c.digest_only.size(), c.digest_only.front(), step - 1, step);
    if (!opt.json_path.empty()) write_file_atomically(opt.json_path, j.dump(2) + "\n");
    return kExitMismatch;
  }
  for (const auto& l : c.loss_values) {
    const double err = l.oracle != 0 ? std::fabs(l.record - l.oracle) / std::fabs(l.oracle)
                                     : (l.record == 0 ? 0.0 : INFINITY);
    j["losses"].push_back(
        {{"name", l.name}, {"record", l.record}, {"oracle", l.oracle}, {"error", err}});
  }
  std::vector<Row> rows;
  for (const auto& d : c.losses.tensors) {
    rows.push_back({d.group, d.name, d.rel_l2, c.bounds.loss});
  }
  for (const auto& d : c.grads.tensors) {
    rows.push_back({d.group, d.name, d.rel_l2, c.bounds.grad});
    j["grads"].push_back({{"name", d.name}, {"error", std::isfinite(d.rel_l2) ? d.rel_l2 : -1.0}});
  }
  for (const auto& d : c.weights.tensors) {
    rows.push_back({d.group, d.name, d.rel_l2, c.bounds.weight});
    j["weights"].push_back(
        {{"name", d.name}, {"error", std::isfinite(d.rel_l2) ? d.rel_l2 : -1.0}});
  }
  // Worst first: by the fraction of its bound used (NaN counts as the worst).
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.used() > b.used(); });
  const auto outside =
      std::count_if(rows.begin(), rows.end(), [](const Row& r) { return !r.within(); });
  std::cout << fmt::format("{:<8} {:<64} {:>12} {:>10}\n", "group", "tensor", "rel. L2", "bound");
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < opt.max_rows; ++i) {
    std::cout << fmt::format("{:<8} {:<64} {:>12.3e} {:>10.3g}{}\n", rows[i].group, rows[i].name,
                             rows[i].error, rows[i].bound, rows[i].within() ? "" : "  OUTSIDE");
  }
  if (rows.size() > static_cast<size_t>(opt.max_rows)) {
    std::cout << fmt::format(
        "# … {} more tensor(s), each using less of its bound (--max-rows "
        "{} lists them all)\n",
        rows.size() - static_cast<size_t>(opt.max_rows), rows.size());
  }
  const Row& worst = rows.front();
  const std::string verdict =
      outside == 0
          ? fmt::format(
                "AGREES (bounds: losses {:.3g}, grads {:.3g}, weights {:.3g}): worst {}/{} at "
                "{:.3g} of {} tensors",
                c.bounds.loss, c.bounds.grad, c.bounds.weight, worst.group, worst.name, worst.error,
                rows.size())
          : fmt::format(
                "DISAGREES (bounds: losses {:.3g}, grads {:.3g}, weights {:.3g}): {} of {} "
                "tensors outside, worst step {} {}/{} at {:.3g}",
                c.bounds.loss, c.bounds.grad, c.bounds.weight, outside, rows.size(), step,
                worst.group, worst.name, worst.error);
  std::cout << fmt::format("# {:.2f} s\n# verdict: {}\n", c.seconds, verdict);
  j["verdict"] = outside == 0 ? "AGREES" : "DISAGREES";
  j["verdict_text"] = verdict;
  j["seconds"] = c.seconds;
  if (!opt.json_path.empty()) write_file_atomically(opt.json_path, j.dump(2) + "\n");
  return outside == 0 ? kExitOk : kExitMismatch;
}

}  // namespace mtp::cli
