#!/usr/bin/env python3
"""The CUDA kernels of Chrome traces (kernels/testing/trace_util.h writes them: Kineto events
with "cat": "kernel", durations in µs), summed by kernel name, largest total first.

  trace_kernels.py TRACE.json [--top N]
      One table per trace: its kernel count and summed kernel time, then the N (default 30)
      kernels with the largest summed time (ms), their launch count and name (parameter list
      dropped, template arguments below the kernel's own shortened to <..>).
  trace_kernels.py A.json B.json --diff [--top N]
      A against B: each kernel name's summed time and count in both and the difference B − A,
      largest |difference| first (what the deterministic and non-deterministic traces of the
      same step differ in, for example).

Exit: 0 done, 2 bad input (a file that is not a Chrome trace, no kernel in it).
"""

import argparse
import collections
import json
import re
import sys


def fail(msg):
    print(f"trace_kernels: {msg}", file=sys.stderr)
    sys.exit(2)


def short(name):
    """The kernel name with its parameter list dropped and template arguments nested deeper than
    the kernel's own shortened to <..>: vectorized_elementwise_kernel<4, at::native::
    CUDAFunctor_add<..>, at::detail::Array<..>> keeps the functor that tells elementwise kernels
    apart."""
    out, depth = [], 0
    for ch in name:
        if ch == "(" and depth == 0 and out:
            break  # the parameter list
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<")
            elif depth == 2:
                out.append("<..>")
        elif ch == ">" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(">")
        elif depth <= 1:
            out.append(ch)
    text = re.sub(r"\s+", " ", "".join(out)).strip()
    return text[5:] if text.startswith("void ") else text


def kernels(path):
    """{short name: [summed µs, count]} of the trace at `path`; exits 2 naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not a readable JSON trace ({e})")
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        fail(f"{path}: no \"traceEvents\" list (not a Chrome trace)")
    table = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X":
            dur = e.get("dur")
            if isinstance(dur, (int, float)):
                row = table[short(str(e.get("name", "?")))]
                row[0] += float(dur)
                row[1] += 1
    if not table:
        fail(f"{path}: no kernel event (\"cat\": \"kernel\") in the trace")
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--diff", action="store_true", help="two traces: B − A per kernel name")
    a = ap.parse_args()
    if a.top < 1:
        ap.error(f"--top {a.top}: expected a row count >= 1")
    if a.diff:
        if len(a.traces) != 2:
            ap.error(f"--diff takes exactly two traces, got {len(a.traces)}")
        ta, tb = kernels(a.traces[0]), kernels(a.traces[1])
        names = set(ta) | set(tb)
        z = [0.0, 0]
        rows = sorted(names, key=lambda n: -abs(tb.get(n, z)[0] - ta.get(n, z)[0]))
        sa, sb = sum(v[0] for v in ta.values()), sum(v[0] for v in tb.values())
        ca, cb = sum(v[1] for v in ta.values()), sum(v[1] for v in tb.values())
        print(f"A {a.traces[0]}: {ca} kernels, {sa / 1000:.2f} ms")
        print(f"B {a.traces[1]}: {cb} kernels, {sb / 1000:.2f} ms")
        print(f"{'A ms':>9} {'A n':>6} {'B ms':>9} {'B n':>6} {'B-A ms':>9}  kernel")
        for n in rows[: a.top]:
            va, vb = ta.get(n, z), tb.get(n, z)
            print(f"{va[0] / 1000:9.3f} {va[1]:6d} {vb[0] / 1000:9.3f} {vb[1]:6d} "
                  f"{(vb[0] - va[0]) / 1000:9.3f}  {n}")
        return
    for path in a.traces:
        t = kernels(path)
        total = sum(v[0] for v in t.values())
        print(f"{path}: {sum(v[1] for v in t.values())} kernels, {total / 1000:.2f} ms")
        for n, (us, c) in sorted(t.items(), key=lambda kv: -kv[1][0])[: a.top]:
            print(f"{us / 1000:9.3f} ms {c:6d}  {n}")


if __name__ == "__main__":
    main()
