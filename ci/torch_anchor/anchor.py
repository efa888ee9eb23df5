#!/usr/bin/env python3
"""The PyTorch anchor (issue 25 §1): the harness's model in plain PyTorch, timed the way
train_step_benchmark's BM_PipelineStep times the harness, so that every harness throughput has a
same-job ratio to what PyTorch itself does on the same GPU.

  check SOURCE.h5 --out ANCHOR.h5 [--fault F]
      Loads SOURCE's step-0 weights (a full float32 harness record, P = 1 or any layout), runs
      its step-1 microbatches through model.py in float32 and writes step 1's losses and main
      grads as a harness record; `mtp-harness compare SOURCE ANCHOR --steps 1 --records
      loss,grad --class rel_l2:1e-5` then says whether the anchor is the harness's model.
      --fault injects one of model.FAULTS (the check must then fail).
  time --size small|tiny --mode eager|compile|compile-cudagraphs --json OUT
      One case in this process (run each case in a fresh process): bf16 parameters and
      activations, fp32 main grads accumulated after every microbatch's backward (as
      BM_PipelineStep does; no optimizer), flash attention, torch.use_deterministic_algorithms
      (True) before the first op (PyTorch >= 2.10: Inductor's deterministic mode too), TF32 off.
      --warmup steps (>= 10; compilation happens there), then --repetitions (>= 5) of
      --iterations steps, each step timed alone with a device sync on both sides. A bitwise
      repeat check: the main grads and losses of a step after the warm-up and of one after the
      last repetition must be equal bit for bit. Writes Google Benchmark JSON rows
      BM_TorchAnchor/<size>/p1/bf16/flash/<mode>/cuda (one per repetition and the median,
      mean, stddev and cv aggregates) with counters tokens_per_second, parameters, tokens,
      bitwise_repeat (1 or 0).
  table HARNESS.json ANCHOR.json... [--markdown OUT]
      Every harness row's median tokens/s beside its ratio to each anchor of its size (the
      anchors' medians). Refuses rows whose parameters or tokens per step differ from the
      anchor's (not the same model).

Exit: 0 done, 1 the bitwise repeat check failed (time), 2 bad input.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before torch (cuBLAS reads it once)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "megatron_recorder"))

# train_step_benchmark.cc's kSmall and kTiny (the `table` step checks the parameter count and the
# tokens per step against the harness's rows of the same job).
SIZES = {
    "small": dict(num_layers=8, hidden_size=1024, ffn_hidden_size=2816, num_attention_heads=16,
                  num_query_groups=16, vocab_size=32768, seq_length=2048, micro_batch_size=1,
                  M=8, mtp_num_layers=1),
    "tiny": dict(num_layers=8, hidden_size=64, ffn_hidden_size=256, num_attention_heads=4,
                 num_query_groups=4, vocab_size=256, seq_length=32, micro_batch_size=2, M=8,
                 mtp_num_layers=2),
}
MODEL_DEFAULTS = dict(mtp_loss_scaling_factor=0.1, rotary_base=10000.0, norm_epsilon=1e-5,
                      untie_embeddings=True)  # harness/config/model_config.h
MODES = ("eager", "compile", "compile-cudagraphs")
TEXT = "/usr/share/common-licenses/GPL-3"  # the harness's default data (token_source.h)


class InputError(Exception):
    """Bad input: the message names the file or flag and the rule broken."""


def deterministic(torch):
    """The harness's determinism settings (determinism_anchors.md), before the first op."""
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------- check

def check(args):
    from harness_record import RECORDED_MODEL_ATTRS, RecordError, SourceRecord, write_record
    import numpy as np
    import torch
    from model import Model, parameter_shapes

    deterministic(torch)
    try:
        src = SourceRecord(args.source, 1)
    except RecordError as e:
        raise InputError(str(e)) from e
    if not src.weights_complete:
        raise InputError(f"{args.source}: step 0 holds no float32 values of "
                         f"{src.not_float32[0]} (digests only, or another dtype); the check "
                         "needs a full float32 record (mtp-harness run --record full)")
    if os.path.abspath(args.out) == os.path.abspath(args.source):
        raise InputError(f"--out {args.out}: is the source record")
    m = dict(MODEL_DEFAULTS, **src.model)
    shapes = parameter_shapes(m)
    if set(shapes) != set(src.weight_shapes):
        only_a = sorted(set(shapes) - set(src.weight_shapes))[:3]
        only_r = sorted(set(src.weight_shapes) - set(shapes))[:3]
        raise InputError(f"{args.source}: its parameters are not the anchor's model's (only the "
                         f"anchor's: {only_a}; only the record's: {only_r}); MoE, biases and "
                         "other dense variants are not in model.py")
    device = torch.device(args.device)
    params = {}
    for name, shape in shapes.items():
        if tuple(src.weight_shapes[name]) != tuple(shape):
            raise InputError(f"{args.source}: {name} has shape {list(src.weight_shapes[name])},"
                             f" the conventions give {list(shape)}")
        params[name] = torch.from_numpy(src.weights0[name]).to(device).requires_grad_(True)
    model = Model(m, src.num_microbatches, device, attention="math", fault=args.fault)
    batch = src.batches[0]
    lm_sum, mtp_sum = 0.0, [0.0] * m["mtp_num_layers"]
    for k in range(src.num_microbatches):
        share, lm, mtp = model(params,
                               torch.from_numpy(batch["tokens"][k]).long().to(device),
                               torch.from_numpy(batch["labels"][k]).long().to(device),
                               torch.from_numpy(batch["loss_mask"][k]).float().to(device))
        share.backward()
        lm_sum += float(lm)
        for d, v in enumerate(mtp):
            mtp_sum[d] += float(v)
    n = src.num_microbatches
    loss = {"lm": lm_sum / n}
    loss.update({f"mtp_{d + 1}": v / n for d, v in enumerate(mtp_sum)})
    if mtp_sum:
        loss["total"] = loss["lm"] + m["mtp_loss_scaling_factor"] / len(mtp_sum) * sum(
            loss[f"mtp_{d + 1}"] for d in range(len(mtp_sum)))
    else:
        loss["total"] = loss["lm"]
    steps = {
        0: {"weight": {k: src.weights0[k] for k in shapes}},
        1: {"batch": {k: batch[k] for k in ("tokens", "labels", "loss_mask")},
            "loss": {k: np.float32(v) for k, v in loss.items()},
            "grad": {k: p.grad.detach().cpu().numpy() for k, p in params.items()}},
    }
    attrs = {k: v for k, v in src.attrs.items() if k in RECORDED_MODEL_ATTRS}
    attrs.update({k: float(v) for k, v in src.optimizer.items()})
    attrs.update({
        "M": n, "P": 1, "V": 1, "data_parallel_size": 1, "num_microbatches": n,
        "layout": f"Et*{m['num_layers']}{'m' * m['mtp_num_layers']}L",
        "implementation": "pytorch anchor (ci/torch_anchor)",
        "variant": "anchor_check" + (f"_fault_{args.fault}" if args.fault else ""),
        "scenario": str(src.attrs.get("scenario", "")),
        "source_record": os.path.basename(args.source), "dtype": "float32",
        "device": args.device, "torch": str(torch.__version__),
        "CUBLAS_WORKSPACE_CONFIG": os.environ["CUBLAS_WORKSPACE_CONFIG"],
        "determinism": "torch.use_deterministic_algorithms(True); TF32 off",
    })
    write_record(args.out, attrs, steps)
    print(f"record {args.out}: step 1 of {args.source} through ci/torch_anchor/model.py "
          f"({len(params)} parameters, {n} microbatches"
          + (f", fault {args.fault}" if args.fault else "") + "): "
          + "  ".join(f"{k} {v:.9f}" for k, v in loss.items()))
    return 0


# ----------------------------------------------------------------------------------------- time

def text_tokens(torch, count):
    """`count` byte tokens of the harness's default text (wrapping around), else of a fixed
    pseudo-random sequence."""
    try:
        with open(TEXT, "rb") as f:
            data = f.read()
    except OSError:
        data = b""
    if not data:
        g = torch.Generator().manual_seed(1234)
        return torch.randint(0, 256, (count,), generator=g)
    reps = count // len(data) + 1
    return torch.tensor(list((data * reps)[:count]), dtype=torch.long)


def time_case(args):
    import torch
    from model import Model, init_parameters

    deterministic(torch)
    if not torch.cuda.is_available():
        raise InputError("time: no CUDA device (the anchor times bf16 flash attention on a GPU)")
    size = dict(MODEL_DEFAULTS, **SIZES[args.size])
    M, b, s = size["M"], size["micro_batch_size"], size["seq_length"]
    dev = torch.device("cuda")
    torch.cuda.set_device(0)
    params = init_parameters(size, torch.bfloat16, dev, seed=1234)
    names = list(params)
    plist = [params[k] for k in names]
    mains = [torch.zeros(p.shape, dtype=torch.float32, device=dev) for p in plist]
    stream = text_tokens(torch, M * b * (s + 1))
    mbs = []
    for k in range(M):
        w = stream[k * b * (s + 1):(k + 1) * b * (s + 1)].view(b, s + 1)
        mbs.append((w[:, :-1].contiguous().to(dev), w[:, 1:].contiguous().to(dev),
                    torch.ones(b, s, dtype=torch.float32, device=dev)))
    model = Model(size, M, dev, attention="flash")

    def forward(*args_):
        share, lm, mtp = model(dict(zip(names, args_[:len(names)])), *args_[len(names):])
        return share, lm.detach(), [t.detach() for t in mtp]

    fwd = forward
    if args.mode != "eager":
        fwd = torch.compile(forward, fullgraph=True, dynamic=False,
                            mode="reduce-overhead" if args.mode == "compile-cudagraphs"
                            else "default")

    def step():
        losses = []
        for tokens, labels, mask in mbs:
            share, lm, mtp = fwd(*plist, tokens, labels, mask)
            share.backward()
            torch._foreach_add_(mains, [p.grad for p in plist])
            for p in plist:
                p.grad = None
            losses.append(torch.stack([lm] + mtp).clone())
        return torch.stack(losses)

    def zero():
        torch._foreach_zero_(mains)

    t_compile = time.perf_counter()
    for _ in range(args.warmup):
        step()
        zero()
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t_compile
    first_losses = step()
    first = [t.clone() for t in mains]
    zero()
    rep_ms = []
    for _ in range(args.repetitions):
        times = []
        for _ in range(args.iterations):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            zero()
        rep_ms.append(1e3 * sum(times) / len(times))
    last_losses = step()
    same = torch.equal(first_losses, last_losses) and all(
        torch.equal(a, b_) for a, b_ in zip(first, mains))
    tokens = M * b * s
    n_params = sum(p.numel() for p in plist)
    name = f"BM_TorchAnchor/{args.size}/p1/bf16/flash/{args.mode}/cuda"
    rows = []
    for i, ms in enumerate(rep_ms):
        rows.append(row(name, "iteration", i, args, ms, tokens, n_params, same))
    med = statistics.median(rep_ms)
    mean = statistics.mean(rep_ms)
    sd = statistics.stdev(rep_ms) if len(rep_ms) > 1 else 0.0
    for agg, ms in (("median", med), ("mean", mean), ("stddev", sd)):
        rows.append(row(name, "aggregate", agg, args, ms, tokens, n_params, same))
    cv = row(name, "aggregate", "cv", args, sd / mean if mean else 0.0, tokens, n_params, same)
    cv["aggregate_unit"] = "percentage"
    rows.append(cv)
    from torch._inductor import config as inductor_config
    context = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "executable": "ci/torch_anchor/anchor.py",
        "torch": str(torch.__version__), "cuda": str(torch.version.cuda),
        "device": torch.cuda.get_device_name(0),
        "deterministic_algorithms": str(torch.are_deterministic_algorithms_enabled()),
        "inductor_deterministic": str(getattr(inductor_config, "deterministic", "absent")),
        "CUBLAS_WORKSPACE_CONFIG": os.environ["CUBLAS_WORKSPACE_CONFIG"],
        "warmup_steps": str(args.warmup), "warmup_seconds": f"{warmup_s:.1f}",
        "library_build_type": "release",
    }
    with open(args.json, "w") as f:
        json.dump({"context": context, "benchmarks": rows}, f, indent=1)
    print(f"{name}: median {med:.2f} ms/step ({tokens / med * 1e3:,.0f} tokens/s), "
          f"repetitions {', '.join(f'{x:.2f}' for x in rep_ms)} ms, warm-up {args.warmup} steps "
          f"{warmup_s:.1f} s, bitwise repeat {'EQUAL' if same else 'DIFFERENT'}, inductor "
          f"deterministic {context['inductor_deterministic']}")
    return 0 if same else 1


def row(name, run_type, index, args, ms, tokens, n_params, same):
    """One Google Benchmark JSON row (harness/perf/benchmark_json.h reads these)."""
    r = {"name": name if run_type == "iteration" else f"{name}_{index}",
         "run_name": name, "run_type": run_type, "repetitions": args.repetitions,
         "threads": 1, "iterations": args.iterations, "real_time": ms, "cpu_time": ms,
         "time_unit": "ms", "family_index": 0, "per_family_instance_index": 0}
    if run_type == "iteration":
        r["repetition_index"] = index
    else:
        r["aggregate_name"] = index
    if run_type == "iteration" or index in ("median", "mean"):
        r["tokens_per_second"] = tokens / ms * 1e3
    r.update({"parameters": n_params, "tokens": tokens, "bitwise_repeat": int(same)})
    return r


# ---------------------------------------------------------------------------------------- table

def load_doc(path):
    """A Google Benchmark JSON file: its top-level object, with "benchmarks" a list of objects."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise InputError(f"{path}: not Google Benchmark JSON ({type(e).__name__}: {e})") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list) or not all(
            isinstance(r, dict) for r in doc["benchmarks"]):
        raise InputError(f"{path}: not Google Benchmark JSON (expected an object whose "
                         "\"benchmarks\" is a list of row objects)")
    return doc


def load_rows(path):
    return load_doc(path)["benchmarks"]


def positive_number(path, name, key, value):
    """`value` as a float, or InputError naming the file, row and key unless it is a finite
    number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value) or value <= 0:
        raise InputError(f"{path}: row {name}: {key} = {value!r} is not a positive finite number")
    return float(value)


def medians(rows, path):
    """{run_name: (median tokens/s, row, repetitions)}: the median aggregate, else the median of
    the iteration rows' tokens_per_second. InputError (naming `path`) for a row without a name
    or with a tokens_per_second or parameters that is not a positive finite number."""
    per = {}
    for r in rows:
        if r.get("error_occurred"):
            continue
        name = r.get("run_name", r.get("name"))
        if not isinstance(name, str) or not name:
            raise InputError(f"{path}: a row without a name (run_name or name)")
        if r.get("run_type", "iteration") != "iteration" and r.get("aggregate_name") != "median":
            continue  # mean, stddev, cv: not read (a stddev of a constant counter is 0)
        if "tokens_per_second" in r:
            positive_number(path, name, "tokens_per_second", r["tokens_per_second"])
        if "parameters" in r:
            p = positive_number(path, name, "parameters", r["parameters"])
            if p != int(p):
                raise InputError(f"{path}: row {name}: parameters = {r['parameters']!r} is not a "
                                 "whole number")
        per.setdefault(name, []).append(r)
    out = {}
    for name, rs in per.items():
        agg = [r for r in rs if r.get("aggregate_name") == "median" and "tokens_per_second" in r]
        its = [r["tokens_per_second"] for r in rs if r.get("run_type", "iteration") == "iteration"
               and "tokens_per_second" in r]
        if agg:
            out[name] = (float(agg[0]["tokens_per_second"]), agg[0], len(its))
        elif its:
            out[name] = (statistics.median(its), rs[0], len(its))
    return out


def deterministic_context(doc):
    """The run context's deterministic_algorithms ("on" / "off"), None where it is not given."""
    ctx = doc.get("context")
    return ctx.get("deterministic_algorithms") if isinstance(ctx, dict) else None


HARNESS_FAMILIES = ("BM_PipelineStep/", "BM_TrainStep/")


def record_ratio_lines(harness):
    """Issue 25's digest bound: each BM_TrainStep record:<r> row's step time over its
    record:none row's (the same setting), from the median tokens/s."""
    out = []
    for n in sorted(harness):
        if not n.startswith("BM_TrainStep/") or "/record:none/" in n or "/record:" not in n:
            continue
        record = n.split("/record:")[1].split("/")[0]
        base = n.replace(f"/record:{record}/", "/record:none/")
        if base in harness:
            out.append(f"| {n.split('/', 1)[1]} | {harness[base][0] / harness[n][0]:.3f} |")
    if not out:
        return []
    return ["| whole step with a record ÷ without (record:none, same setting) | time ratio |",
            "|---|---|"] + out + [""]


def determinism_ratio_lines(det, nondet, det_path, nondet_path):
    """Issue 25's determinism bound: each row's step time with deterministic algorithms on
    (`det`, the harness's settings) over the same row's with them off (`nondet`,
    MTP_BENCH_DETERMINISTIC=0), and per size and device the fastest deterministic harness-kernel
    BM_PipelineStep row over the fastest non-deterministic one of either kernel set. InputError
    when the files share no row."""
    common = sorted(set(det) & set(nondet))
    if not common:
        raise InputError(f"{nondet_path}: no row in common with {det_path} (the same rows run "
                         "with MTP_BENCH_DETERMINISTIC=0 are expected)")
    for n in common:
        a, b = det[n][1].get("parameters"), nondet[n][1].get("parameters")
        if a is not None and b is not None and int(a) != int(b):
            raise InputError(f"{nondet_path}: {n} has {int(b)} parameters, {det_path} {int(a)}: "
                             "not the same model")
    out = ["| row | deterministic tokens/s | non-deterministic tokens/s | time ratio det ÷ non-det |",
           "|---|---|---|---|"]
    for n in common:
        out.append(f"| {n.split('/', 1)[1]} | {det[n][0] / 1e3:.1f}K | {nondet[n][0] / 1e3:.1f}K | "
                   f"{nondet[n][0] / det[n][0]:.3f} |")

    def best(rows, size, device, harness_only):
        c = [(v[0], n) for n, v in rows.items()
             if n.startswith(f"BM_PipelineStep/{size}/") and n.split("/")[7:8] == [device]
             and (not harness_only or n.split("/")[6:7] == ["harness"])]
        return max(c) if c else None

    devices = sorted({n.split("/")[7] for n in common
                      if n.startswith("BM_PipelineStep/") and len(n.split("/")) > 7})
    for size in SIZES:
        for device in devices:
            d, nd = best(det, size, device, True), best(nondet, size, device, False)
            if d and nd:
                out.append(f"| {size} ({device}): fastest deterministic harness row "
                           f"({d[1].split('/', 1)[1]}) ÷ fastest non-deterministic row "
                           f"({nd[1].split('/', 1)[1]}) | {d[0] / 1e3:.1f}K | {nd[0] / 1e3:.1f}K | "
                           f"{nd[0] / d[0]:.3f} |")
    return out + [""]


def write_atomically(path, text):
    """`text` into `path` through a temporary file beside it and a rename: the old file stays
    whole when the write fails. InputError naming the path."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InputError(f"--markdown {path}: cannot write ({e.strerror or e})") from e


def table(args):
    inputs = [args.harness] + list(args.anchors) + (
        [args.nondeterministic] if args.nondeterministic else [])
    if args.markdown is not None:
        if not args.markdown:
            raise InputError("--markdown: an empty path")
        for p in inputs:
            if os.path.exists(p) and os.path.realpath(p) == os.path.realpath(args.markdown):
                raise InputError(f"--markdown {args.markdown}: is an input of this table")
    harness_doc = load_doc(args.harness)
    harness = {n: v for n, v in medians(harness_doc["benchmarks"], args.harness).items()
               if n.startswith(HARNESS_FAMILIES)}
    anchors = {}
    for path in args.anchors:
        for name, v in medians(load_rows(path), path).items():
            parts = name.split("/")
            if not name.startswith("BM_TorchAnchor/") or len(parts) < 6 or parts[1] not in SIZES:
                raise InputError(f"{path}: row {name}: not an anchor row "
                                 "(BM_TorchAnchor/<size>/p1/<dtype>/<attention>/<mode>/<dev>)")
            if "parameters" not in v[1]:
                raise InputError(f"{path}: row {name}: no parameters count (anchor.py time "
                                 "writes one)")
            anchors[name] = v
    if not anchors:
        raise InputError("table: no anchor row with tokens_per_second in "
                         + ", ".join(args.anchors))
    lines = []
    for size in SIZES:
        mine = {n: v for n, v in anchors.items() if n.startswith(f"BM_TorchAnchor/{size}/")}
        rows = {n: v for n, v in harness.items() if n.split("/")[1:2] == [size]}
        if not mine or not rows:
            continue
        anchor_names = sorted(mine)
        short = [n.split("/")[5] for n in anchor_names]
        lines.append(f"| {size}: harness row | reps | tokens/s | "
                     + " | ".join(f"÷ torch {s}" for s in short) + " |")
        lines.append("|---|---|---|" + "---|" * len(short))
        for n in anchor_names:
            tps, r, reps = mine[n]
            lines.append(f"| torch anchor {n.split('/')[5]} (bitwise repeat "
                         f"{'yes' if r.get('bitwise_repeat') else 'NO'}) | {reps} | "
                         f"{tps / 1e3:.1f}K | " + " | ".join(
                             f"{tps / mine[a][0]:.2f}" for a in anchor_names) + " |")
        ref = mine[anchor_names[0]][1]
        for n in sorted(rows):
            tps, r, reps = rows[n]
            if "parameters" in r and int(r["parameters"]) != int(ref["parameters"]):
                raise InputError(f"{args.harness}: {n} has {int(r['parameters'])} parameters, "
                                 f"the {size} anchor {int(ref['parameters'])}: not the same model")
            lines.append(f"| {n.split('/', 1)[1]} | {reps} | {tps / 1e3:.1f}K | "
                         + " | ".join(f"{tps / mine[a][0]:.2f}" for a in anchor_names) + " |")
        lines.append("")
    if not lines:
        raise InputError(f"table: no harness row of {args.harness} has a size the anchors have "
                         f"({', '.join(sorted({n.split('/')[1] for n in anchors}))})")
    lines += record_ratio_lines(harness)
    if args.nondeterministic:
        nondet_doc = load_doc(args.nondeterministic)
        for path, doc, want in ((args.harness, harness_doc, "on"),
                                (args.nondeterministic, nondet_doc, "off")):
            got = deterministic_context(doc)
            if got is not None and got != want:
                raise InputError(f"{path}: its run had deterministic_algorithms = {got!r}, "
                                 f"expected {want!r} here")
        nondet = {n: v for n, v in medians(nondet_doc["benchmarks"], args.nondeterministic).items()
                  if n.startswith(HARNESS_FAMILIES)}
        lines += determinism_ratio_lines(harness, nondet, args.harness, args.nondeterministic)
    text = "\n".join(lines)
    if args.markdown:
        write_atomically(args.markdown, text + "\n")
    print(text)
    return 0


# ----------------------------------------------------------------------------------------- main

def positive_at_least(lo):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"{v} is below the minimum {lo}")
        return v
    return parse


def parse_args(argv):
    from model import FAULTS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="the anchor's model against a harness record's step 1")
    c.add_argument("source", help="a full float32 harness record (step 0 weights, step 1 batch)")
    c.add_argument("--out", required=True, help="the anchor's record to write")
    c.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    c.add_argument("--fault", choices=FAULTS, default=None,
                   help="inject a convention mistake (the comparison must then fail)")
    t = sub.add_parser("time", help="time one case (run each case in a fresh process)")
    t.add_argument("--size", choices=sorted(SIZES), required=True)
    t.add_argument("--mode", choices=MODES, required=True)
    t.add_argument("--json", required=True, help="Google Benchmark JSON to write")
    t.add_argument("--warmup", type=positive_at_least(10), default=10)
    t.add_argument("--repetitions", type=positive_at_least(5), default=5)
    t.add_argument("--iterations", type=positive_at_least(1), default=None,
                   help="steps per repetition (default BM_PipelineStep's: 3 small, 10 tiny)")
    b = sub.add_parser("table", help="harness rows with their ratios to the anchors")
    b.add_argument("harness", help="train_step_benchmark JSON")
    b.add_argument("anchors", nargs="+", help="anchor JSON files from `time`")
    b.add_argument("--markdown", help="also write the table here")
    b.add_argument("--nondeterministic", help="train_step_benchmark JSON of the same rows with "
                   "MTP_BENCH_DETERMINISTIC=0: each row's deterministic / non-deterministic ratio")
    args = p.parse_args(argv)
    if args.command == "time" and args.iterations is None:
        args.iterations = 3 if args.size == "small" else 10
    return args


def main(argv):
    args = parse_args(argv)
    try:
        return {"check": check, "time": time_case, "table": table}[args.command](args)
    except InputError as e:
        print(f"anchor: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
