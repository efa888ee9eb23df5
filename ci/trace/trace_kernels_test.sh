#!/usr/bin/env bash
# ci.trace_kernels: ci/trace/trace_kernels.py on two hand-made Chrome traces whose sums are known
# (kernels told apart by their own template arguments, nested ones folded, parameter lists
# dropped; CPU operators ignored), the --diff table's rows and
# order, and bad input refused with exit 2 and the file named.
# Usage: trace_kernels_test.sh PYTHON WORK_DIR
set -euo pipefail
py=$1 work=$2
tool=$(dirname "$0")/trace_kernels.py
rm -rf "$work" && mkdir -p "$work"
cat > "$work/a.json" <<'J'
{"traceEvents": [
 {"cat": "kernel", "ph": "X", "name": "void gemm<float, 4>(int)", "dur": 1250},
 {"cat": "kernel", "ph": "X", "name": "void gemm<float, 8>(int)", "dur": 750},
 {"cat": "kernel", "ph": "X", "name": "void gemm<float, 4>(long)", "dur": 0},
 {"cat": "cpu_op", "ph": "X", "name": "aten::mm", "dur": 99000},
 {"cat": "kernel", "ph": "X", "name": "fill", "dur": 500}]}
J
cat > "$work/b.json" <<'J'
{"traceEvents": [
 {"cat": "kernel", "ph": "X", "name": "void gemm<float, 4>(int)", "dur": 1000},
 {"cat": "kernel", "ph": "X", "name": "convert_dq", "dur": 3000}]}
J
fail() { echo "FAIL: $*"; exit 1; }
out=$("$py" "$tool" "$work/a.json")
expected="$work/a.json: 4 kernels, 2.50 ms
    1.250 ms      2  gemm<float, 4>
    0.750 ms      1  gemm<float, 8>
    0.500 ms      1  fill"
[ "$out" = "$expected" ] || fail "summary: got
$out
expected
$expected"
out=$("$py" "$tool" "$work/a.json" "$work/b.json" --diff)
rows=$(echo "$out" | tail -n +4)
expected="    0.000      0     3.000      1     3.000  convert_dq
    0.750      1     0.000      0    -0.750  gemm<float, 8>
    0.500      1     0.000      0    -0.500  fill
    1.250      2     1.000      1    -0.250  gemm<float, 4>"
[ "$rows" = "$expected" ] || fail "diff: got
$rows
expected
$expected"
echo '{"traceEvents": []}' > "$work/empty.json"
echo 'not json' > "$work/bad.json"
for f in empty bad missing; do
  set +e
  err=$("$py" "$tool" "$work/$f.json" 2>&1 > /dev/null)
  rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$f.json: exit $rc, expected 2"
  [[ $err == *"$work/$f.json"* ]] || fail "$f.json: message does not name the file: $err"
done
set +e
"$py" "$tool" "$work/a.json" --diff > /dev/null 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "--diff with one trace: exit $rc, expected 2"
echo "ci.trace_kernels: passed"
