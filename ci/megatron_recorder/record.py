#!/usr/bin/env python3
"""Record a real Megatron-LM training run in the harness's record schema.

Megatron-LM (megatron/core from the public repository: GPTModel with an MTP block, local spec,
DistributedDataParallel, get_megatron_optimizer, the forward_backward_no_pipelining schedule and
finalize_model_grads) trains the model a harness record describes, on that record's batches,
for N steps at P = 1, DP = 1, in float32 on one GPU with deterministic algorithms and TF32 off.
It writes per step: the batch, the losses (lm, mtp_1..mtp_D, total, the harness's forms), every
main grad after finalisation and every weight after the optimizer step, under the harness's
names, so that `mtp-harness compare`, `replay`, `golden` and `report` read it.

  --init harness    Megatron starts from the record's step-0 weights (the harness's init)
  --init megatron   Megatron initialises the model itself (init_method_std 0.02, --seed);
                    `mtp-harness replay` then runs the harness from Megatron's weights

Usage (on a machine with a GPU, torch and h5py; a Megatron-LM tree on PYTHONPATH):
  PYTHONPATH=build-megatron/Megatron-LM python3 ci/megatron_recorder/record.py \
      SOURCE.h5 --init harness --steps 3 --out megatron.h5
Exit: 0 the record is written, 2 bad input (names the file and the rule), 3 Megatron failed.
"""

import argparse
import os
import sys

import numpy as np

# Before torch is imported: cuBLAS reads it once (determinism_anchors.md).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness_record import (RECORDED_MODEL_ATTRS, RecordError, SourceRecord,  # noqa: E402
                            harness_name, write_record)

RECORDER = "megatron-lm (ci/megatron_recorder)"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="harness record: the model, Adam's settings, the batches and "
                   "(--init harness) the initial weights")
    p.add_argument("--init", choices=("harness", "megatron"), required=True,
                   help="initial weights: the record's step 0, or Megatron's own init")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps (default 3)")
    p.add_argument("--seed", type=int, default=None,
                   help="Megatron's RNG seed (default: the record's seed)")
    p.add_argument("--out", required=True, help="the record to write")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error(f"--steps {args.steps}: must be >= 1")
    return args


def megatron_revision():
    """The Megatron-LM commit: REVISION beside the megatron/ package, else 'unknown'."""
    import megatron.core  # `megatron` itself is a namespace package (no __file__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        megatron.core.__file__))))
    try:
        with open(os.path.join(root, "REVISION")) as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def output_problem(out, source):
    """Why the record cannot be written at `out` (checked before anything trains), or ''."""
    if os.path.isdir(out):
        return "is a directory"
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        return f"its folder {parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"its folder {parent} is not writable"
    if os.path.exists(out) and os.path.exists(source) and os.path.samefile(out, source):
        return "is the source record"
    return ""


def loss_func(loss_mask, output_tensor):
    """Megatron-LM pretrain_gpt.py loss_func (lines 254-259 at d98e8a64dd), without get_args():
    the masked per-token sum, the token count and the report. The schedule divides the sum by
    max(count, 1) and by M (schedules.py forward_step_calc_loss)."""
    import torch
    losses = output_tensor.view(-1).float()
    mask = loss_mask.view(-1).float()
    loss = torch.sum(losses * mask)
    num_tokens = mask.sum().clone().detach().to(torch.int)
    report = {"lm loss": torch.cat([loss.clone().detach().view(1), num_tokens.view(1)])}
    return loss, num_tokens, report


def forward_step(data_iterator, model):
    """pretrain_gpt.py forward_step: the model returns per-token losses; the MTP block's losses
    ride on the hidden states through MTPLossAutoScaler. attention_mask None: Megatron's softmax
    makes the causal mask itself."""
    from functools import partial
    batch = next(data_iterator)
    output = model(batch["tokens"], batch["position_ids"], None, labels=batch["labels"],
                   loss_mask=batch["loss_mask"])
    return output, partial(loss_func, batch["loss_mask"])


def to_numpy(t):
    return t.detach().to("cpu").contiguous().numpy().copy()


def torch_optimizers(opt):
    """The torch optimizers under Megatron's optimizer (a ChainedOptimizer holds several)."""
    chained = getattr(opt, "chained_optimizers", None)
    return [o.optimizer for o in chained] if chained else [opt.optimizer]


def adam_state(opt, params, step):
    """The optimizer group of the record (record/schema.h): the step count (float64) and every
    parameter's exp_avg and exp_avg_sq after the step, so that `replay --steps n` resumes from
    Megatron's own state at step n − 1. Raises RecordError when a parameter has no Adam state."""
    state = {}
    for o in torch_optimizers(opt):
        state.update(o.state)
    group = {"step": np.float64(step)}
    for name, p in params.items():
        s = state.get(p)
        if not s or "exp_avg" not in s or int(float(s["step"])) != step:
            raise RecordError(f"step {step}: Megatron's optimizer holds no Adam state of step "
                              f"{step} for {name}")
        group[f"{name}.exp_avg"] = to_numpy(s["exp_avg"])
        group[f"{name}.exp_avg_sq"] = to_numpy(s["exp_avg_sq"])
    return group


def main(argv):
    args = parse_args(argv)
    try:
        return record(args)
    except RecordError as e:
        print(f"megatron_recorder: {e}", file=sys.stderr)
        return 2
    except Exception:  # Megatron-LM (or torch) failed: its traceback, exit 3
        import traceback
        traceback.print_exc()
        return 3


def record(args):
    src = SourceRecord(args.source, args.steps)
    if args.init == "harness" and not src.weights_complete:
        print(f"megatron_recorder: {args.source}: step 0 holds no float32 values of "
              f"{src.not_float32[0]} (digests only, or another dtype); --init harness needs a "
              "full float32 record (mtp-harness run --record full)", file=sys.stderr)
        return 2
    out_problem = output_problem(args.out, args.source)
    if out_problem:
        print(f"megatron_recorder: --out {args.out}: {out_problem}", file=sys.stderr)
        return 2
    if src.optimizer["weight_decay"] != 0.0:
        print(f"megatron_recorder: {args.source}: weight_decay is {src.optimizer['weight_decay']}"
              "; Megatron exempts norms and biases from it (optimizer/__init__.py "
              "_get_param_groups) and the harness does not, so the recorder needs 0",
              file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int(src.attrs.get("seed", 1234))

    import torch
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    if not torch.cuda.is_available():
        print("megatron_recorder: no CUDA device: Megatron-LM's DDP and schedules need one",
              file=sys.stderr)
        return 2

    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.transformer.multi_token_prediction import MTPLossLoggingHelper
    import megatron_model

    megatron_model.initialize(seed)
    config, ddp, opt = megatron_model.build(src.model, src.optimizer)
    params = {harness_name(n): p for n, p in ddp.module.named_parameters()}
    if set(params) != set(src.weight_shapes):
        only_m = sorted(set(params) - set(src.weight_shapes))
        only_h = sorted(set(src.weight_shapes) - set(params))
        print(f"megatron_recorder: Megatron's parameters and {args.source}'s differ: only "
              f"Megatron's {only_m[:5]}, only the record's {only_h[:5]}", file=sys.stderr)
        return 3
    for name, p in params.items():
        if tuple(p.shape) != src.weight_shapes[name]:
            print(f"megatron_recorder: {name}: Megatron's shape {list(p.shape)}, the record's "
                  f"{list(src.weight_shapes[name])}", file=sys.stderr)
            return 3
    if args.init == "harness":
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(torch.from_numpy(src.weights0[name]).to(p.device))

    steps = {0: {"weight": {n: to_numpy(p) for n, p in params.items()}}}
    m = src.num_microbatches
    b, s = src.model["micro_batch_size"], src.model["seq_length"]
    d = src.model["mtp_num_layers"]
    lam = src.model["mtp_loss_scaling_factor"]
    position_ids = torch.arange(s, device="cuda").unsqueeze(0).expand(b, s)
    fb = get_forward_backward_func()
    for step in range(1, args.steps + 1):
        batch = src.batches[step - 1]
        microbatches = [{
            "tokens": torch.from_numpy(batch["tokens"][k]).long().cuda(),
            "labels": torch.from_numpy(batch["labels"][k]).long().cuda(),
            "loss_mask": torch.from_numpy(batch["loss_mask"][k]).float().cuda(),
            "position_ids": position_ids,
        } for k in range(m)]
        ddp.zero_grad_buffer()
        opt.zero_grad()
        MTPLossLoggingHelper.clean_metrics_in_tracker()
        reports = fb(forward_step_func=forward_step, data_iterator=iter(microbatches),
                     model=[ddp], num_microbatches=m, seq_length=s, micro_batch_size=b,
                     decoder_seq_length=s, forward_only=False)
        grads = {n: to_numpy(p.main_grad) for n, p in params.items()}
        ok, grad_norm, _ = opt.step()
        if not ok:
            print(f"megatron_recorder: step {step}: Megatron's optimizer skipped the step",
                  file=sys.stderr)
            return 3
        # The harness's loss forms (record/schema.h): each microbatch's masked mean, averaged
        # over the M microbatches (the objective Megatron differentiates), per MTP depth the
        # same from MTPLossLoggingHelper (which sums each microbatch's mean), and the total,
        # summed in float64.
        lm = sum(float(r["lm loss"][0]) / max(float(r["lm loss"][1]), 1.0) for r in reports) / m
        loss = {"lm": lm}
        if d:
            per_depth = MTPLossLoggingHelper.tracker["loss_values"].double().cpu()
            for k in range(d):
                loss[f"mtp_{k + 1}"] = float(per_depth[k]) / m
        loss["total"] = lm + (lam / d * sum(loss[f"mtp_{k + 1}"] for k in range(d)) if d else 0.0)
        steps[step] = {
            "batch": {k: batch[k] for k in ("tokens", "labels", "loss_mask")},
            # float32, the harness's main dtype (record/schema.h), so that `compare` pairs
            # them with a harness record's losses.
            "loss": {k: np.float32(v) for k, v in loss.items()},
            "grad": grads,
            "weight": {n: to_numpy(p) for n, p in params.items()},
            "optimizer": adam_state(opt, params, step),
        }
        print(f"step {step}: " + "  ".join(f"{k} {v:.9f}" for k, v in loss.items()) +
              (f"  grad_norm {float(grad_norm):.6e}" if grad_norm is not None else ""))

    attrs = {k: v for k, v in src.attrs.items() if k in RECORDED_MODEL_ATTRS}
    attrs.update({k: float(v) for k, v in src.optimizer.items()})
    attrs.update({
        "M": m, "P": 1, "V": 1, "data_parallel_size": 1, "num_microbatches": m,
        "layout": f"Et*{src.model['num_layers']}{'m' * d}L",
        "schedule": "megatron forward_backward_no_pipelining",
        "optimizer": "adam",
        "megatron_optimizer": f"{type(opt).__name__} over " + ", ".join(
            f"{type(o).__module__}.{type(o).__name__}" for o in torch_optimizers(opt)),
        "implementation": RECORDER, "variant": f"megatron_{args.init}_init",
        "scenario": str(src.attrs.get("scenario", "")),
        "data_source": str(src.attrs.get("data_source", "")),
        "data_sha256": str(src.attrs.get("data_sha256", "")),
        "source_record": os.path.basename(args.source),
        "init": ("the source record's step-0 weights" if args.init == "harness" else
                 f"Megatron-LM's init_method_std {megatron_model.INIT_METHOD_STD}, "
                 f"model_parallel_cuda_manual_seed({seed})"),
        "seed": seed, "dtype": "float32", "device": torch.cuda.get_device_name(0),
        "torch": str(torch.__version__), "cuda": str(torch.version.cuda),
        "megatron_commit": megatron_revision(),
        "megatron_patch": ("is_inference_column_parallel_linear answers False (no Transformer "
                           "Engine; ci/megatron_recorder/megatron_model.py)"
                           if megatron_model.PATCHED_TE_CHECK else "none"),
        "CUBLAS_WORKSPACE_CONFIG": os.environ["CUBLAS_WORKSPACE_CONFIG"],
        "determinism": "torch.use_deterministic_algorithms(True); TF32 off; "
                       "megatron deterministic_mode=True",
    })
    write_record(args.out, attrs, steps)
    print(f"record {args.out}: {args.steps} step(s), {len(params)} parameters, init "
          f"{args.init}, Megatron-LM {attrs['megatron_commit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
