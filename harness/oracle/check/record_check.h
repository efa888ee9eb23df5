// File: harness/oracle/check/record_check.h
//
// A record's training steps against the straight-line float64 program (harness/oracle/oracle.h):
// the weights the record holds before step n and step n's batch go through the program; its
// losses and main grads are compared with the record's under the class rel_l2 with a bound
// derived from the dtype the model computed in. Used by `mtp-harness oracle` (one record) and by
// scenario expectations of class "oracle" (every listed variant's record), issue 21.
//
// Example:
//   record::RecordReader rec("runs/default/latest/ref_p4v2.h5");
//   oracle::RecordCheck c = oracle::check_record(rec, {});      // step 1, losses and grads
//   bool agrees = c.agrees();  // c.grads.first_divergence names the worst offender otherwise
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/compare/compare.h"
#include "harness/record/record.h"
#include "harness/report/report.h"
#include "harness/scenario/scenario.h"

namespace mtp::oracle {

/// Bounds on the relative L2 error (‖record − oracle‖₂ / ‖oracle‖₂ per tensor; for a loss the
/// relative difference).
struct Bounds {
  double loss = 0.0;
  double grad = 0.0;
  double weight = 0.0;  ///< the weights after the optimizer step (the masters of a bf16 run)
};

/// The bounds for a model computing in `model_dtype`, in units of its machine epsilon ε (2^-52,
/// 2^-23, 2^-7 for float64, float32, bfloat16), set with headroom over what every CPU scenario's
/// records measure against the oracle (README, "The float64 oracle"):
///   float64   losses and grads 2^19·ε ≈ 1.2e-10 (measured ≤ 3e-15)
///   float32   losses and grads 2^9·ε ≈ 6.1e-5   (measured ≤ 7.0e-7, MoE included)
///   bfloat16  losses 2^-1·ε ≈ 3.9e-3 (measured ≤ 3.1e-5: losses and softmax are fp32),
///             grads 2^4·ε = 0.125 (measured ≤ 0.063: every activation is rounded to bf16)
/// The weights after the step are updated in the main dtype (fp32 masters for bf16) from the
/// record's own grads: 2^9·ε of float32 (float64 runs: 2^19·ε of float64).
Bounds dtype_bounds(record::DType model_dtype);

/// What to check.
struct CheckRequest {
  /// Training steps (each ≥ 1): step n needs the weights of step n − 1 and the batch, losses
  /// and grads of step n in full.
  std::set<int> steps{1};
  bool losses = true;                     ///< compare the loss group
  bool grads = true;                      ///< compare the grad group
  bool weights = true;                    ///< check the optimizer step, where it can be
  std::vector<std::string> include{"*"};  ///< glob patterns on tensor names
  std::vector<std::string> exclude;
  std::optional<double> bound;  ///< one bound for losses and grads instead of dtype_bounds
};

/// One loss as recorded and as the oracle computes it.
struct LossValue {
  int step = 0;
  std::string name;
  double record = 0.0, oracle = 0.0;
};

/// What check_record found. In `losses` and `grads` record A is the record (its values as
/// float64) and record B the oracle; each TensorDiff's rel_l2 is the error, its
/// max_limit_fraction the share of the bound used.
struct RecordCheck {
  record::DType model_dtype = record::DType::kF32;
  Bounds bounds;
  std::vector<std::string> notes;        ///< settings derived from the record (replay's notes)
  std::vector<std::string> digest_only;  ///< "step 1 grad/x": tensors held as digests only
  compare::CompareResult losses;         ///< class rel_l2:bounds.loss (empty when not requested)
  /// class rel_l2:bounds.grad; with clipping on also "attr/grad_norm", the global norm the
  /// record's clip used against the oracle's grads' norm
  compare::CompareResult grads;
  /// class rel_l2:bounds.weight: the weights after step n against an independent float64 Adam
  /// (torch.optim.AdamW's update: decoupled weight decay, bias correction) applied to the
  /// record's weights of step n − 1 and its own main grads of step n (clipped by the norm of those
  /// grads when the run clips). Checked where the optimizer state before the step is known: step
  /// 1 (zero moments) or a record with save_optimizer_state; else a note says why not.
  compare::CompareResult weights;
  std::vector<LossValue> loss_values;
  double seconds = 0.0;  ///< wall time of the whole check
  /// No verdict: a tensor the check needs is held as digests only (nothing was computed).
  bool undecided() const { return !digest_only.empty(); }
  bool agrees() const { return !undecided() && losses.equal && grads.equal && weights.equal; }
};

/// Checks `req.steps` of `rec` against the float64 program. Throws RecordError when the record
/// lacks a step or group the check needs or holds something the model cannot have (a parameter
/// missing or mis-shaped, a batch not [K, b, s] integers within the vocabulary and a 0/1 mask,
/// losses other than lm, mtp_1..mtp_D, total as float scalars), InputError for a step < 1 or a
/// bound that is not finite and > 0. Digest-only tensors make the result undecided.
RecordCheck check_record(const record::RecordReader& rec, const CheckRequest& req);

/// A scenario expectation of class "oracle" (scenario::Expectation::oracle) on the records of
/// its variants (paths by variant name): per variant a pair "<variant> vs oracle/loss", one
/// "vs oracle/grad" and one "vs oracle/weight" (when some step's weights could be checked) for
/// the groups it selects. A pair whose record holds a non-finite value does
/// not hold; a digest-only record makes the pair undecided (skipped when none fails). Throws
/// RecordError as check_record.
report::ExpectationResult evaluate_oracle_expectation(
    const scenario::Expectation& e, const std::map<std::string, std::string>& record_paths);

}  // namespace mtp::oracle
