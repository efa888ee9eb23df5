#!/bin/bash
# CTest anchor.torch_model (issue 25 §1): is ci/torch_anchor/model.py the harness's model? The
# harness's reference trains ci/megatron_recorder/source.toml's ref_p1 (4 layers, GQA, D = 2,
# EOD-masked Megatron data) in float32 on the CPU; anchor.py check runs its step-0 weights and
# step-1 microbatches through model.py; `compare --class rel_l2:1e-5` on step 1's losses and
# main grads must say EQUAL. Then each of model.FAULTS (a convention broken on purpose:
# interleaved RoPE, eh_proj fed [h, e] for [e, h], the next MTP depth fed a depth's output
# before its final layernorm) must make that comparison say DIFFERENT (exit 1, not an input
# error), so the check can fail.
#   check_test.sh MTP_HARNESS PYTHON WORKDIR   (run from the repository root)
# Exit 0 when every case went as stated, 1 otherwise (the failing case named).
set -uo pipefail
bin=$1 py=$2 work=$3
here=$(dirname "$0")
rm -rf "$work" && mkdir -p "$work" || exit 1

fail() { echo "anchor.torch_model: FAILED: $*" >&2; exit 1; }

"$bin" run ci/megatron_recorder/source.toml --variant ref_p1 --out "$work/source.h5" \
  > "$work/source.log" 2>&1 || { cat "$work/source.log"; fail "the harness run (source.log above)"; }

# compare_case NAME EXPECTED_EXIT EXPECTED_VERDICT [--fault F]
compare_case() {
  local name=$1 want_rc=$2 want=$3
  shift 3
  "$py" "$here/anchor.py" check "$work/source.h5" --out "$work/$name.h5" "$@" \
    > "$work/$name.check.log" 2>&1 || { cat "$work/$name.check.log"; fail "$name: anchor.py check"; }
  "$bin" compare "$work/source.h5" "$work/$name.h5" --steps 1 --records loss,grad \
    --class rel_l2:1e-5 > "$work/$name.compare.log" 2>&1
  local rc=$?
  local verdict
  verdict=$(grep -E '^# verdict:' "$work/$name.compare.log" | tail -n 1)
  echo "$name: exit $rc, $verdict"
  [[ $rc == "$want_rc" && $verdict == "# verdict: $want"* ]] ||
    { tail -n 20 "$work/$name.compare.log"; fail "$name: wanted exit $want_rc and $want"; }
}

compare_case anchor 0 EQUAL
for f in $("$py" -c "import sys; sys.path.insert(0, '$here'); import model; print(*model.FAULTS)"); do
  compare_case "fault_$f" 1 DIFFERENT --fault "$f"
done
echo "anchor.torch_model: passed"
