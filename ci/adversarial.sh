#!/usr/bin/env bash
# ci/adversarial.sh: the fault campaign of issues 19 and 11. It replays every reproducer those
# issues list (bad input, hostile records, resource limits, signals, full disks) against the
# mtp-harness binary and prints one row per category:
#
#   category | runs | exit codes seen | crashes (exit >= 128 / signal) | hangs (timeout) |
#   wrong exit 0 | partial files | inputs changed | other wrong exit | bad message | verdict
#
# then, for every failing run, what was expected, what came, and the message. Run by hand or in a
# nightly job; NOT part of the 90-minute CI (about 5-10 minutes on 2 cores; FULL=1 adds the slow
# ones). Each reproducer runs in a fresh scratch directory under one mktemp -d directory, under
# `timeout`, with TMPDIR inside that scratch directory, and is then checked for:
#   1. the expected exit code (2: bad input, 1: two inputs differ, 3: a genuine infrastructure
#      fault such as a full disk, 128+N: killed by signal N on purpose; some cases accept a set);
#   2. no *.tmp-* (or *.tmp) file and no temporary directory left behind;
#   3. no output under its final name when the command failed (outputs named with -o);
#   4. every file that was in the scratch directory before (every input) unchanged (sha256);
#   5. a message: stderr non-empty on exit 2 or 3, no raw ESC byte on stdout or stderr, the
#      texts a case requires present (-g) and those it forbids absent (-G), and the time bound
#      (-T) kept where the issue says "at once".
#
# Usage:
#   ci/adversarial.sh [CATEGORY...]   run these categories (default: all); --list names them
#   FULL=1 ci/adversarial.sh          also run the SLOW categories (data-prepare-memory)
#   KEEP=1 ci/adversarial.sh          keep the scratch directory (its path is printed)
#   MTP_HARNESS=path ci/adversarial.sh   the binary under test (default:
#                                     build/harness/cli/mtp-harness, else build/mtp-harness)
#   TIMEOUT=S                         default per-run timeout in seconds (default 60)
#
# Needs bash 4.4+, coreutils (timeout, sha256sum, truncate), python3 with h5py and numpy (Debian:
# apt-get install python3-h5py; PYTHON=... picks the interpreter) and, for the tmpfs cases of
# i11-disk-full, root (mount); without root those cases are skipped and say so.
# Exit status: 0 every row clean; 1 a row failed; 2 usage or setup error.
#
# Writing a case: scratch; build the inputs in the current directory; then
#   expect CODES [-n NAME] [-o OUTPUT]... [-i INPUT]... [-g TEXT]... [-G TEXT]... [-t TIMEOUT]
#          [-T MAX_SECONDS] -- COMMAND...
# CODES is one exit code or a comma-separated set ("0,2"). COMMAND runs in the scratch directory;
# use "${ULIMIT[@]}" -f 500 "$BIN" ... to run it under a resource limit.
set -u
set -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPERS=$ROOT/ci/adversarial
FULL=${FULL:-0}
KEEP=${KEEP:-0}
TIMEOUT=${TIMEOUT:-60}
GPL3=/usr/share/common-licenses/GPL-3
ESC=$'\e'
ULIMIT=(bash -c 'ulimit "$1" "$2" || exit 97; shift 2; exec "$@"' ulimit)

die() { echo "adversarial.sh: $*" >&2; exit 2; }

# ---- The categories, in table order; SLOW ones run only with FULL=1 ----

CATEGORIES=(
  outputs-overwrite-inputs replay-scalar-weights json-nesting megatron-token-bomb
  data-prepare-memory file-size-limit exit3-on-bad-input junit-control-chars
  memory-vs-process-limits replay-inconsistent-attributes golden-parser terminal-escapes
  garbage-state unclear-messages
  i11-disk-full i11-signals i11-unwritable-outputs i11-corrupted-records i11-non-utf8-path
  i11-proc-self-mem i11-absurd-sizes
)
declare -A SLOW=([data-prepare-memory]=1)

# ---- Row bookkeeping ----

declare -A RUNS CODES CRASH HANG WRONG0 PARTIAL CHANGED BADCODE BADMSG SKIPPED SECS
DETAILS=()
CAT=""
SCRATCH=""
NSCRATCH=0
MOUNTS=()

begin_category() {
  CAT=$1
  RUNS[$CAT]=0 CRASH[$CAT]=0 HANG[$CAT]=0 WRONG0[$CAT]=0 PARTIAL[$CAT]=0 CHANGED[$CAT]=0
  BADCODE[$CAT]=0 BADMSG[$CAT]=0 CODES[$CAT]=""
  SKIPPED[$CAT]=""
}

# skip REASON: a reproducer that could not run here (not a failure; shown under the table).
skip() { SKIPPED[$CAT]+="${SKIPPED[$CAT]:+; }$*"; }

# scratch: a fresh, empty scratch directory for the next reproducer; cd into it.
scratch() {
  NSCRATCH=$((NSCRATCH + 1))
  SCRATCH=$WORK/$(printf '%03d' "$NSCRATCH")-$CAT
  mkdir -p "$SCRATCH/tmpdir" && cd "$SCRATCH" || die "cannot make $SCRATCH"
}

# setup COMMAND...: builds an input; when it fails the reproducer counts as failed ("setup").
setup() {
  local log=$WORK/setup.log
  if ! "$@" >>"$log" 2>&1; then
    RUNS[$CAT]=$((RUNS[$CAT] + 1))
    BADMSG[$CAT]=$((BADMSG[$CAT] + 1))
    DETAILS+=("[$CAT] setup failed: $(shown "$@") -- $(tail -n 1 "$log" | cat -v | cut -c1-200)")
    return 1
  fi
}

forge() { "$PY" "$HELPERS/forge.py" "$@"; }

# The arguments as one line fit for a terminal: paths shortened, odd bytes escaped.
shown() {
  local -a args=("$@")
  [[ ${args[0]:-} == bash && ${args[3]:-} == ulimit ]] && args=(ulimit "${args[@]:4}")
  local out="" a
  for a in "${args[@]}"; do
    a=${a//"$BIN"/mtp-harness}
    a=${a//"$SCRATCH/"/}
    a=${a//"$WORK/"/}
    a=${a//"$HELPERS/"/}
    out+="$(printf '%q' "$a") "
  done
  out=${out% }
  if ((${#out} > 150)); then out="${out:0:147}..."; fi
  printf '%s' "$out"
}

in_set() {  # in_set CODE "0,2"
  local c
  IFS=, read -ra cs <<<"$2"
  for c in "${cs[@]}"; do [[ $c == "$1" ]] && return 0; done
  return 1
}

# fingerprint FILE: sha256 of small files; size and mtime of big ones (a 6 GiB sparse scenario).
fingerprint() {
  local size
  size=$(stat -c %s -- "$1" 2>/dev/null) || { echo missing; return; }
  if ((size > 64 * 1024 * 1024)); then
    stat -c 'size=%s mtime=%Y' -- "$1"
  else
    sha256sum <"$1" | cut -c1-64
  fi
}

# snapshot ARRAY PATH...: ARRAY[file] = fingerprint, for every regular file under PATHs.
snapshot() {
  local -n snap=$1
  shift
  local f
  while IFS= read -r -d '' f; do
    snap[$f]=$(fingerprint "$f")
  done < <(find "$@" -type f -print0 2>/dev/null)
}

# temporaries PATH...: NUL-separated names of temporary files under PATHs.
temporaries() {
  find "$@" \( -name '*.tmp-*' -o -name '*.tmp' \) -print0 2>/dev/null
}

# The line of a run's output that says most: the harness's own error line, else the last line.
message_of() {
  local err=$1 out=$2 line
  line=$(grep -a -m1 'mtp-harness: \|signal_run.py:\|Error\|error:' "$err" 2>/dev/null)
  [[ -n $line ]] || line=$(grep -a -v '^[[:space:]]*$' "$err" 2>/dev/null | tail -n 1)
  [[ -n $line ]] || line=$(grep -a -v '^[[:space:]]*$' "$out" 2>/dev/null | tail -n 1)
  [[ -n $line ]] || line="(no output)"
  printf '%s' "$line" | cat -v | cut -c1-240
}

expect() {
  local codes=$1
  shift
  local name="" timeout_s=$TIMEOUT max_s=""
  local -a outs=() ins=() greps=() nogreps=()
  while (($#)); do
    case $1 in
      -n) name=$2; shift 2 ;;
      -o) outs+=("$2"); shift 2 ;;
      -i) ins+=("$2"); shift 2 ;;
      -g) greps+=("$2"); shift 2 ;;
      -G) nogreps+=("$2"); shift 2 ;;
      -t) timeout_s=$2; shift 2 ;;
      -T) max_s=$2; shift 2 ;;
      --) shift; break ;;
      *) die "expect: unknown option '$1' (case in $CAT)" ;;
    esac
  done
  (($#)) || die "expect: no command (case in $CAT)"
  [[ -n $name ]] || name=$(shown "$@")
  local n=${RUNS[$CAT]}
  local out=$WORK/logs/$CAT.$n.out err=$WORK/logs/$CAT.$n.err

  # Before: every file of the scratch directory and every -i file; outputs that exist; temporaries.
  local -A before=() after=() existed=() old_tmp=()
  snapshot before "$SCRATCH" "${ins[@]}"
  local o dirs=("$SCRATCH")
  for o in "${outs[@]}"; do
    [[ -e $o || -L $o ]] && existed[$o]=1
    dirs+=("$(dirname -- "$o")")
  done
  local f
  while IFS= read -r -d '' f; do old_tmp[$f]=1; done < <(temporaries "${dirs[@]}")

  local t0=$EPOCHREALTIME rc
  TMPDIR=$SCRATCH/tmpdir timeout -k 10 "$timeout_s" "$@" >"$out" 2>"$err" </dev/null
  rc=$?
  local elapsed
  elapsed=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')

  RUNS[$CAT]=$((n + 1))
  CODES[$CAT]+="$rc "
  local -a problems=()
  local hang=0
  if ((rc == 124)) || { ((rc == 137)) && awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e >= t) }'; }; then
    hang=1
    HANG[$CAT]=$((HANG[$CAT] + 1))
    problems+=("hang: killed after ${timeout_s} s")
  fi
  local staged=1
  [[ " $* " == *"/signal_run.py "* && $rc == 254 ]] && staged=0
  if ((!hang)) && ! in_set "$rc" "$codes"; then
    if ((!staged)); then
      BADCODE[$CAT]=$((BADCODE[$CAT] + 1))
      problems+=("the signal could not be sent while a temporary existed")
    elif ((rc >= 128)); then
      CRASH[$CAT]=$((CRASH[$CAT] + 1))
      problems+=("crash: exit $rc (signal $((rc - 128)))")
    elif ((rc == 0)); then
      WRONG0[$CAT]=$((WRONG0[$CAT] + 1))
      problems+=("wrong exit 0")
    else
      BADCODE[$CAT]=$((BADCODE[$CAT] + 1))
      problems+=("exit $rc")
    fi
  fi

  # Partial files: new temporaries, leftover temporary directories, failed outputs under their name.
  local partial=()
  while IFS= read -r -d '' f; do
    [[ -n ${old_tmp[$f]:-} ]] || partial+=("${f#"$SCRATCH/"}")
  done < <(temporaries "${dirs[@]}")
  while IFS= read -r -d '' f; do
    partial+=("${f#"$SCRATCH/"}/")
  done < <(find "$SCRATCH/tmpdir" -mindepth 1 -maxdepth 1 -print0 2>/dev/null)
  if ((rc != 0)); then
    for o in "${outs[@]}"; do
      [[ -z ${existed[$o]:-} && (-e $o || -L $o) ]] && partial+=("${o#"$SCRATCH/"} (exit $rc)")
    done
  fi
  if ((${#partial[@]})); then
    PARTIAL[$CAT]=$((PARTIAL[$CAT] + 1))
    problems+=("left: $(printf '%s ' "${partial[@]}" | cat -v | cut -c1-160)")
  fi

  # Inputs changed: any file that was there before and is not the same now.
  snapshot after "$SCRATCH" "${ins[@]}"
  local changed=()
  for f in "${!before[@]}"; do
    [[ ${after[$f]:-missing} == "${before[$f]}" ]] || changed+=("${f#"$SCRATCH/"}")
  done
  if ((${#changed[@]})); then
    CHANGED[$CAT]=$((CHANGED[$CAT] + 1))
    problems+=("changed: $(printf '%s ' "${changed[@]}" | cat -v | cut -c1-160)")
  fi

  # The message: present on errors, no raw ESC, required texts, forbidden texts, time bound.
  local msg=()
  if ((rc == 2 || rc == 3)) && [[ ! -s $err ]]; then msg+=("empty stderr"); fi
  if LC_ALL=C grep -q -a "$ESC" "$out" "$err"; then msg+=("raw ESC byte in the output"); fi
  local g
  for g in "${greps[@]}"; do
    cat "$out" "$err" | LC_ALL=C grep -q -a -F -- "$g" || msg+=("no '$(printf '%s' "$g" | cat -v)' in the output")
  done
  for g in "${nogreps[@]}"; do
    cat "$out" "$err" | LC_ALL=C grep -q -a -F -- "$g" && msg+=("says '$(printf '%s' "$g" | cat -v)'")
  done
  if [[ -n $max_s ]] && ((!hang)) && awk -v e="$elapsed" -v m="$max_s" 'BEGIN { exit !(e > m) }'; then
    msg+=("took ${elapsed} s (bound ${max_s} s)")
  fi
  if ((${#msg[@]})); then
    BADMSG[$CAT]=$((BADMSG[$CAT] + 1))
    problems+=("${msg[@]}")
  fi

  printf '%s\t%s\t%s\t%ss\t%s\n' "$CAT" "$codes" "$rc" "$elapsed" "$name" >>"$WORK/runs.log"
  if ((${#problems[@]})); then
    local joined
    joined=$(printf '%s; ' "${problems[@]}")
    DETAILS+=("[$CAT] $name: expected $codes, got $rc in ${elapsed} s: ${joined%; } -- $(message_of "$err" "$out")")
    return 1
  fi
  return 0
}

# ---- Scenario files ----

# scenario FILE [section.key=value]... [-- RAW_TOML]: the tiny scenario (2 layers, H 16, 2 steps of
# 2 microbatches, one variant ref_p1) with keys replaced, added (value) or removed (value '-');
# RAW_TOML, when given, replaces the [[variant]] block (variants and expectations).
scenario() {
  local file=$1
  shift
  local -A kv=(
    [scenario.name]='"tiny"'
    [model.num_layers]=2 [model.hidden_size]=16 [model.ffn_hidden_size]=32
    [model.num_attention_heads]=2 [model.vocab_size]=256 [model.seq_length]=8
    [model.micro_batch_size]=1 [model.mtp_num_layers]=1
    [training.steps]=2 [training.num_microbatches]=2 [training.seed]=1234
    [data.kind]='"text"' [data.path]="\"$GPL3\""
  )
  local -a order=(scenario.name model.num_layers model.hidden_size model.ffn_hidden_size
    model.num_attention_heads model.vocab_size model.seq_length model.micro_batch_size
    model.mtp_num_layers training.steps training.num_microbatches training.seed data.kind
    data.path)
  local tail=$'[[variant]]\nname = "ref_p1"\nimplementation = "reference"\n'
  while (($#)); do
    if [[ $1 == -- ]]; then tail=$2; break; fi
    local k=${1%%=*} v=${1#*=}
    [[ -v kv[$k] ]] || order+=("$k")
    kv[$k]=$v
    shift
  done
  {
    local section k
    for section in scenario model training data; do
      echo "[$section]"
      for k in "${order[@]}"; do
        [[ $k == "$section".* && ${kv[$k]} != - ]] && echo "${k#*.} = ${kv[$k]}"
      done
    done
    printf '%s\n' "$tail"
  } >"$file"
}

# The default scenario's model and batch (8 layers, H 64, 8 microbatches of 2) for 1 step: a
# record of a few MiB, so that file-size limits bite.
DEFAULT_MODEL=(scenario.name='"def1"' model.num_layers=8 model.hidden_size=64
  model.ffn_hidden_size=128 model.num_attention_heads=4 model.seq_length=32
  model.micro_batch_size=2 model.mtp_num_layers=2 training.steps=1 training.num_microbatches=8)

# ---- Fixtures, made once on first use ----

FIX_REC=""
FIX_RUNS=""
FIX_FAILED=""

# need_record: $FIX_REC, a full record of the tiny scenario's ref_p1 (2 steps) with optimizer state.
need_record() {
  [[ -n $FIX_REC ]] && return 0
  if [[ -n $FIX_FAILED ]]; then
    RUNS[$CAT]=$((RUNS[$CAT] + 1))
    BADMSG[$CAT]=$((BADMSG[$CAT] + 1))
    DETAILS+=("[$CAT] not run: the fixture record could not be made (see above)")
    return 1
  fi
  mkdir -p "$WORK/fixtures"
  scenario "$WORK/fixtures/tiny.toml"
  if ! (cd "$WORK/fixtures" && "$BIN" run tiny.toml --variant ref_p1 --save-optimizer-state \
          --out rec.h5 >run.log 2>&1); then
    RUNS[$CAT]=$((RUNS[$CAT] + 1))
    BADMSG[$CAT]=$((BADMSG[$CAT] + 1))
    DETAILS+=("[$CAT] fixture: 'run tiny.toml --variant ref_p1 --save-optimizer-state' failed -- $(tail -n 1 "$WORK/fixtures/run.log" | cat -v)")
    FIX_FAILED=1
    return 1
  fi
  FIX_REC=$WORK/fixtures/rec.h5
}

# need_check_dir: $FIX_RUNS, the records of `check tiny.toml` (for golden --records).
need_check_dir() {
  [[ -n $FIX_RUNS ]] && return 0
  need_record || return 1
  if ! (cd "$WORK/fixtures" && "$BIN" check tiny.toml --allow-skipped --out runs >check.log 2>&1); then
    DETAILS+=("[$CAT] fixture: 'check tiny.toml --out runs' failed -- $(tail -n 1 "$WORK/fixtures/check.log" | cat -v)")
    BADMSG[$CAT]=$((BADMSG[$CAT] + 1))
    return 1
  fi
  FIX_RUNS=$WORK/fixtures/runs
}

# need_goldens: $FIX_GOLDEN, the goldens of the tiny scenario (golden update --records).
FIX_GOLDEN=""
need_goldens() {
  [[ -n $FIX_GOLDEN ]] && return 0
  need_check_dir || return 1
  mkdir -p "$WORK/fixtures/golden"
  setup "$BIN" golden update "$WORK/fixtures/tiny.toml" --records "$FIX_RUNS" \
    --golden-dir "$WORK/fixtures/golden" || return 1
  FIX_GOLDEN=$WORK/fixtures/golden
}

# A step group and its datasets in a record (steps/000000/weight/...), found by name.
dataset() { forge h5-first "$1" "$2" "$3"; }

# ==== Issue 19 ====

# 1. check and run overwrote their own inputs and outputs with exit 0.
cat_outputs_overwrite_inputs() {
  need_record || return
  local ck=(check s.toml --variant ref_p1 --allow-skipped --out o)
  scratch; scenario s.toml
  expect 2 -n "check --json <the scenario file>" -- "$BIN" "${ck[@]}" --json s.toml
  scratch; scenario s.toml
  expect 2 -n "check --junit <the scenario file>" -- "$BIN" "${ck[@]}" --junit s.toml
  scratch; scenario s.toml; ln -s s.toml link.toml
  expect 2 -n "check --json <a symlink to the scenario>" -- "$BIN" "${ck[@]}" --json link.toml
  scratch; scenario s.toml
  expect 2 -o o/ref_p1.h5 -n "check --json OUT/ref_p1.h5 (its own record)" -- \
    "$BIN" "${ck[@]}" --json o/ref_p1.h5
  scratch; cp "$GPL3" data.txt; scenario s.toml data.path='"data.txt"'
  expect 2 -n "check --html <the training data>" -- "$BIN" "${ck[@]}" --html data.txt
  scratch; scenario s.toml
  expect 2 -o x.out -n "check --json X --html X" -- "$BIN" "${ck[@]}" --json x.out --html x.out
  scratch; scenario s.toml
  expect 2 -o x.out -n "check --json X --junit X" -- "$BIN" "${ck[@]}" --json x.out --junit x.out
  scratch; scenario s.toml
  expect 2 -o o/r.html -n "check --json r.html (the default HTML path)" -- \
    "$BIN" "${ck[@]}" --json o/r.html
  scratch; scenario s.toml; mkdir o; cp "$FIX_REC" o/ref_p1.h5
  expect 2 -n "check --init-from OUT/ref_p1.h5 (the record it writes)" -- \
    "$BIN" "${ck[@]}" --init-from o/ref_p1.h5
  scratch; scenario s.toml; cp "$FIX_REC" R.h5
  expect 2 -n "run --out R.h5 --init-from R.h5" -- \
    "$BIN" run s.toml --variant ref_p1 --out R.h5 --init-from R.h5
  scratch; scenario s.toml; cp "$FIX_REC" R.h5
  expect 2 -n "run --out R.h5 --resume R.h5:1" -- \
    "$BIN" run s.toml --variant ref_p1 --out R.h5 --resume R.h5:1
  scratch; scenario s.toml training.init_from='"R.h5"'; cp "$FIX_REC" R.h5
  expect 2 -n "run --out R.h5 with [training].init_from = R.h5" -- \
    "$BIN" run s.toml --variant ref_p1 --out R.h5
  scratch; scenario s.toml; cp "$FIX_REC" R.h5
  expect 2 -n "replay R.h5 --out R.h5" -- "$BIN" replay R.h5 --out R.h5
  # Issue 11 #5: a symlink planted at the old predictable temporary name is not followed.
  scratch; scenario s.toml; mkdir o; echo precious >victim; ln -s ../victim o/report.json.tmp
  expect 0 -n "check with a symlink planted at o/report.json.tmp (issue 11 #5)" -- "$BIN" "${ck[@]}"
}

# 2. replay died of SIGSEGV on a scalar linear_fc2 / linear_qkv weight at step 0.
cat_replay_scalar_weights() {
  need_record || return
  local part ds
  scratch; cp "$FIX_REC" r.h5
  expect 0 -n "replay <the unmodified fixture record> (control: EQUAL)" -- "$BIN" replay r.h5
  for part in layers.0.mlp.linear_fc2.weight layers.0.self_attention.linear_qkv.weight \
              embedding.word_embeddings.weight; do
    scratch; cp "$FIX_REC" r.h5
    ds=$(dataset r.h5 steps/000000/weight "$part") && setup forge h5-scalar r.h5 "$ds" &&
      expect 2 -g r.h5 -n "replay: step 0 weight ${ds##*/} as a scalar dataset" -- "$BIN" replay r.h5
  done
}

# 3. perf merge crashed on JSON nested 100,000 deep; 30,000 deep made a 1.8 GB file; 1e400.
cat_json_nesting() {
  scratch; setup forge deep-json deep.json 100000 &&
    expect 2 -o m.json -g deep.json -n "perf merge: JSON nested 100,000 deep" -- \
      "$BIN" perf merge deep.json --out m.json
  # (under a 200 MB file-size limit, so that an unbounded output cannot fill the disk)
  scratch; setup forge deep-json deep.json 30000 &&
    expect 2 -o m.json -g deep.json -n "perf merge: JSON nested 30,000 deep (60 KB)" -- \
      "${ULIMIT[@]}" -f 204800 "$BIN" perf merge deep.json --out m.json
  scratch; setup forge deep-json deep.json 100000 && setup forge bench-json b.json BM_X 100 &&
    expect 2 -g deep.json -n "perf compare: baseline nested 100,000 deep" -- \
      "$BIN" perf compare deep.json b.json
  scratch; setup forge raw-number-json big.json 1e400 &&
    expect 2 -o m.json -g big.json -n "perf merge: real_time 1e400" -- \
      "$BIN" perf merge big.json --out m.json
}

# 4. 4,000 sequences in a 48 KB .idx, all spanning one 2 MiB .bin: 4 Gi tokens declared.
# Refusing it (2) and reading only what the run needs (0) are both right; running out of memory
# (3) or time is not. Under a 4 GB address-space limit so that it cannot eat the machine.
cat_megatron_token_bomb() {
  scratch; setup forge megatron-bomb bomb 4000 2097152 &&
    scenario s.toml data.kind='"megatron"' data.path=- data.path_prefix='"bomb"' &&
    expect 0,2 -t 120 -T 30 -n "check on the token bomb (4000 x 1 Mi tokens of one 2 MiB .bin)" -- \
      "${ULIMIT[@]}" -v 4000000 "$BIN" check s.toml --allow-skipped --out o
}

# 5. data prepare needed 13-16x its input in memory. SLOW: a 200 MB text under a 1.5 GB
# address-space limit must stream through.
cat_data_prepare_memory() {
  scratch
  setup "$PY" -c '
import sys
line = b"the quick brown fox jumps over the lazy dog, again and again and again\n"
with open("big.txt", "wb") as f:
    for _ in range(200_000_000 // len(line)):
        f.write(line)' || return
  expect 0 -t 600 -n "data prepare: a 200 MB text under ulimit -v 1.5 GB" -- \
    "${ULIMIT[@]}" -v 1500000 "$BIN" data prepare big.txt ds || return
  if [[ ! -s ds.idx || ! -s ds.bin ]]; then
    BADMSG[$CAT]=$((BADMSG[$CAT] + 1))
    DETAILS+=("[$CAT] data prepare exited 0 but ds.idx or ds.bin is missing or empty")
  fi
}

# 6. SIGXFSZ not handled: under ulimit -f 500 check died with exit 153 and left a .h5.tmp-*.
# A resource fault: exit 3 (or 2 when refused from the estimate before training).
cat_file_size_limit() {
  scratch; scenario def1.toml "${DEFAULT_MODEL[@]}"
  expect 3,2 -o o/ref_p1.h5 -n "check under ulimit -f 500 (a record of a few MiB)" -- \
    "${ULIMIT[@]}" -f 500 "$BIN" check def1.toml --variant ref_p1 --allow-skipped --out o
  scratch; scenario def1.toml "${DEFAULT_MODEL[@]}"
  expect 3,2 -o r.h5 -n "run under ulimit -f 500" -- \
    "${ULIMIT[@]}" -f 500 "$BIN" run def1.toml --variant ref_p1 --out r.h5
  # A writer that has no estimate to refuse from: data prepare of a 2 MB text (a 2 MB .bin).
  scratch; head -c 2000000 /dev/urandom | base64 >doc.txt
  expect 3,2 -o ds.bin -o ds.idx -n "data prepare <2.7 MB text> under ulimit -f 500" -- \
    "${ULIMIT[@]}" -f 500 "$BIN" data prepare doc.txt ds
}

# 7. exit 3 ("internal error") where the input is at fault.
cat_exit3_on_bad_input() {
  need_record || return
  local ds
  scratch; cp "$FIX_REC" r.h5
  ds=$(dataset r.h5 steps/000000/weight layers.1.input_layernorm) &&
    setup forge h5-rename r.h5 "$ds" "${ds%/*}/decoder.layers.9223372036854775808.input_layernorm.weight" &&
    expect 2 -g r.h5 -n "replay: weight name with layer index 2^63" -- "$BIN" replay r.h5
  local key
  for key in adam_beta1 adam_beta2; do
    scratch; scenario s.toml "training.$key=1e308"
    expect 2 -g s.toml -n "check: $key = 1e308" -- "$BIN" check s.toml --allow-skipped --out o
  done
  scratch; setup forge raw-number-json big.json 1e400 && setup forge bench-json b.json BM_Big 100 &&
    expect 2 -g big.json -n "perf compare: a number 1e400" -- "$BIN" perf compare big.json b.json
  scratch; cp "$WORK/fixtures/tiny.toml" s.toml; mkdir g; ln -s tiny.txt g/tiny.txt
  expect 2 -g tiny.txt -n "golden check: the golden file is a symlink loop" -- \
    "$BIN" golden check s.toml --golden-dir g
  need_goldens &&
    scratch && cp "$WORK/fixtures/tiny.toml" s.toml && ln -s loop loop &&
    expect 2 -g loop -n "golden check --records <a symlink loop>" -- \
      "$BIN" golden check s.toml --records loop --golden-dir "$FIX_GOLDEN"
  scratch; scenario s.toml
  local long
  long=$(forge long-path "$SCRATCH" 4090) &&
    expect 2 -o o/ref_p1.h5 -n "check --json <a 4,090-byte path> (refused before training)" -- \
      "$BIN" check s.toml --allow-skipped --out o --json "$long"
}

# 8. control characters, U+FFFE and U+FFFF in an expectation's why made invalid JUnit XML.
cat_junit_control_chars() {
  scratch
  scenario s.toml -- '[[variant]]
name = "ref_p1"
implementation = "reference"
[[variant]]
name = "ref_p1_again"
implementation = "reference"
[[variant]]
name = "ref_p2"
implementation = "reference"
pp = 2
[[expectation]]
name = "same"
variants = ["ref_p1", "ref_p1_again"]
class = "bitwise"
why = "bell \u0007 esc \u001b[31m red vt \u000b del \u007f nonchars \uFFFE \uFFFF end"
[[expectation]]
name = "p1_vs_p2_fails"
variants = ["ref_p1", "ref_p2"]
class = "bitwise"
records = ["grad"]
why = "fails on purpose: \u0001\u0002 \u001b]0;title\u0007 \uFFFE"'
  expect 1 -n "check --junit with control characters in why (one pair fails)" -- \
    "$BIN" check s.toml --out o --junit j.xml --html h.html
  expect 0 -n "the JUnit file parses as XML (xml.etree)" -- "$PY" "$HELPERS/forge.py" xml-ok j.xml
  expect 0 -n "the JSON report parses as JSON" -- "$PY" "$HELPERS/forge.py" json-ok o/report.json
}

# 9. the memory estimate ignored RLIMIT_AS / RLIMIT_DATA: vocab_size = 2,000,000 under a 10 GB
# address-space limit failed with exit 3 after 34 s; 1024 MoE experts ran on past 6.8 GB. The
# latter was not the estimate (8.5 GiB; the run peaks at 8.3 GiB resident) but a writer that
# could not keep up: the record's per-tensor storage decision walked every parameter (O(n^2))
# and HDF5 compact link storage costs O(n^3) for the 16,000 expert tensors of a group, so the
# queued snapshots grew. Now the run takes about 45 s and fits 10 GB; under 6 GB it is refused.
# Both on the default model, 1 step.
cat_memory_vs_process_limits() {
  scratch; scenario s.toml "${DEFAULT_MODEL[@]}" model.vocab_size=2000000
  expect 2 -o o/ref_p1.h5 -t 120 -T 15 -n "check: vocab_size = 2000000 under ulimit -v 10000000" -- \
    "${ULIMIT[@]}" -v 10000000 "$BIN" check s.toml --allow-skipped --out o
  scratch; scenario s.toml "${DEFAULT_MODEL[@]}" model.num_moe_experts=1024
  expect 2 -o o/ref_p1.h5 -t 60 -T 15 -n "check: num_moe_experts = 1024 under ulimit -v 6000000" -- \
    "${ULIMIT[@]}" -v 6000000 "$BIN" check s.toml --allow-skipped --out o
  if [[ -n ${FULL:-} ]]; then
    scratch; scenario s.toml "${DEFAULT_MODEL[@]}" model.num_moe_experts=1024
    expect 0 -t 180 -n "check: num_moe_experts = 1024 under ulimit -v 10000000 (fits: trains)" -- \
      "${ULIMIT[@]}" -v 10000000 "$BIN" check s.toml --allow-skipped --out o
  fi
}

# 10. replay accepted inconsistent attributes (P, DP = 2^32+1 truncated; clip_grad NaN/inf/-1 as
# "off"; V ignored) and reported EQUAL.
cat_replay_inconsistent_attributes() {
  need_record || return
  local spec
  for spec in "P int 4294967297" "data_parallel_size int 4294967297" "clip_grad float nan" \
              "clip_grad float inf" "clip_grad float -1" "V int 2" "V int 4294967297" \
              "M int 4294967298"; do
    scratch; cp "$FIX_REC" r.h5
    # shellcheck disable=SC2086
    setup forge h5-attr r.h5 $spec &&
      expect 2 -g r.h5 -n "replay: attribute ${spec/ int / = }" -- "$BIN" replay r.h5
  done
}

# 11. golden parser gaps: duplicated rows, the scenario line, non-numbers, junk, CRLF.
cat_golden_parser() {
  need_goldens || return
  local G=$FIX_GOLDEN
  local gc=(golden check s.toml --records "$FIX_RUNS" --golden-dir g)
  golden_case() {  # golden_case CODES NAME SED-OR-COMMAND...
    local codes=$1 name=$2
    shift 2
    scratch; cp "$WORK/fixtures/tiny.toml" s.toml; mkdir g; cp "$G/tiny.txt" g/tiny.txt
    setup "$@" && expect "$codes" -n "golden check: $name" -- "$BIN" "${gc[@]}"
  }
  golden_case 0 "the unmodified goldens (control: EQUAL)" true
  golden_case 2 "a duplicated digests row whose first copy is wrong" "$PY" -c '
import re
p = "g/tiny.txt"; lines = open(p).read().split("\n")
i = next(i for i, l in enumerate(lines) if re.match(r"digests \S+ 1 grad ", l))
d = lines[i].split(" ")
d[4] = "0123456789abcdef" if d[4] != "0123456789abcdef" else "fedcba9876543210"
lines.insert(i, " ".join(d)); open(p, "w").write("\n".join(lines))'
  golden_case 2 "a duplicated losses row whose first copy is wrong" "$PY" -c '
p = "g/tiny.txt"; lines = open(p).read().split("\n")
i = next(i for i, l in enumerate(lines) if l.startswith("losses "))
lines.insert(i, lines[i].replace("lm=", "lm=1").replace("lm=1-", "lm=-1"))
open(p, "w").write("\n".join(lines))'
  golden_case 2 "the scenario line names another scenario" sed -i 's/^scenario tiny$/scenario other/' g/tiny.txt
  golden_case 2 "lm=nan in a losses row" sed -i '0,/^losses /s/ lm=[^ ]*/ lm=nan/' g/tiny.txt
  golden_case 2 "trailing junk after the last row" sh -c 'echo "junk after the last row" >>g/tiny.txt'
  golden_case 2 "a truncated last row" sh -c 'head -c -40 g/tiny.txt >g/t && mv g/t g/tiny.txt'
  # CRLF: refusing it (2) or reading it as the same goldens (0) are both right; "changed" is not.
  golden_case 0,2 "CRLF line ends" sed -i 's/$/\r/' g/tiny.txt
}

# 12. raw ESC and control bytes from file names, include patterns, layout strings and benchmark
# names reached the terminal. expect fails any run whose stdout or stderr holds a raw ESC.
cat_terminal_escapes() {
  need_record || return
  local red="${ESC}[31m" title="${ESC}]0;pwned"$'\a'
  scratch
  expect 2 -n "info <missing file named with ESC>" -- "$BIN" info "x${red}red.h5"
  scratch; cp "$FIX_REC" "r${title}.h5"
  expect 0 -n "info <a record named with ESC and BEL>" -- "$BIN" info "r${title}.h5"
  scratch; cp "$FIX_REC" "r${red}.h5"; cp "$FIX_REC" r.h5
  expect 0 -n "compare <a record named with ESC> r.h5" -- "$BIN" compare "r${red}.h5" r.h5
  scratch; cp "$FIX_REC" r.h5
  expect 0,1,2 -n "compare --include <pattern with ESC>" -- "$BIN" compare r.h5 r.h5 --include "${red}*"
  scratch
  expect 2 -n "layout <string with ESC>" -- "$BIN" layout "E|t${red}|L" --pp 2
  scratch
  expect 2 -n "equiv <layout with ESC>" -- "$BIN" equiv "Et*8${red}mmL" 'Et*8mmL' --pp 1
  scratch; setup forge bench-json a.json "BM_${red}Red${ESC}[0m" 100 &&
    setup forge bench-json b.json "BM_${red}Red${ESC}[0m" 100 &&
    expect 0 -n "perf compare: benchmark names with ESC" -- "$BIN" perf compare a.json b.json
  scratch
  expect 2 -n "check <missing scenario named with ESC>" -- "$BIN" check "s${red}.toml" --out o
  scratch; scenario s.toml
  expect 2 -n "check --variant <name with ESC>" -- "$BIN" check s.toml --variant "${red}x" --out o
  scratch; scenario s.toml -- '[[variant]]
name = "a\u001b[31mb"
implementation = "reference"'
  expect 2 -n "check: a variant name holding ESC in the scenario" -- "$BIN" check s.toml --out o
}

# 13. garbage state accepted with exit 0: init_from NaN weights, --resume negative Adam moments.
cat_garbage_state() {
  need_record || return
  local ds value
  scratch; scenario s.toml; cp "$FIX_REC" rec.h5
  expect 0 -o o.h5 -n "run --init-from <the unmodified fixture> (control)" -- \
    "$BIN" run s.toml --variant ref_p1 --init-from rec.h5 --out o.h5
  scratch; scenario s.toml; cp "$FIX_REC" rec.h5
  expect 0 -o o.h5 -n "run --resume <the unmodified fixture>:1 (control)" -- \
    "$BIN" run s.toml --variant ref_p1 --resume rec.h5:1 --out o.h5
  for value in nan inf; do
    scratch; scenario s.toml; cp "$FIX_REC" bad.h5
    ds=$(dataset bad.h5 steps/000000/weight layers.0.mlp.linear_fc1.weight) && setup forge h5-set bad.h5 "$ds" "$value" &&
      expect 2 -o o.h5 -g bad.h5 -n "run --init-from <record with a $value weight>" -- \
        "$BIN" run s.toml --variant ref_p1 --init-from bad.h5 --out o.h5
  done
  scratch; scenario s.toml training.init_from='"bad.h5"'; cp "$FIX_REC" bad.h5
  ds=$(dataset bad.h5 steps/000000/weight layers.0.mlp.linear_fc1.weight) && setup forge h5-set bad.h5 "$ds" nan &&
    expect 2 -o o/ref_p1.h5 -g bad.h5 -n "check: [training].init_from = <record with a NaN weight>" -- \
      "$BIN" check s.toml --allow-skipped --out o
  local what
  for what in "exp_avg_sq -1" "exp_avg_sq nan" "exp_avg nan"; do
    scratch; scenario s.toml; cp "$FIX_REC" bad.h5
    ds=$(dataset bad.h5 steps/000001 "${what% *}") && [[ ${ds##*/} == *"${what% *}"* ]] &&
      setup forge h5-set bad.h5 "$ds" "${what#* }" &&
      expect 2 -o o.h5 -g bad.h5 -n "run --resume <record whose ${what% *} holds ${what#* }>:1" -- \
        "$BIN" run s.toml --variant ref_p1 --resume bad.h5:1 --out o.h5
  done
}

# 14. unclear messages.
cat_unclear_messages() {
  local a b
  local pair
  for pair in 'Et*7mmL Et*8mmL' 'Et*8mL Et*8mmL' 'Et*8mmLL Et*8mmL'; do
    read -r a b <<<"$pair"
    scratch
    expect 2 -G '<mtp-harness equiv>' -n "equiv '$a' '$b' --pp 1: no position in a text never seen" -- \
      "$BIN" equiv "$a" "$b" --pp 1
  done
  scratch
  scenario long.toml -- "[[variant]]
name = \"$(printf 'a%.0s' {1..5000})\"
implementation = \"reference\""
  expect 2 -g long.toml: -n "check: a 5,000-character variant name (names the scenario position)" -- \
    "$BIN" check long.toml --out o
  scratch
  expect 2 -G 18446744073709551611 -g max-memory -n "run --max-memory -5G" -- \
    "$BIN" run --variant ref_p1 --max-memory -5G --out r.h5
  scratch
  expect 2 -G 18446744073709551611 -g max-memory -n "check --max-memory -5G" -- \
    "$BIN" check --max-memory -5G --out o
  scratch; truncate -s 6G big.toml
  expect 2 -t 120 -T 5 -g big.toml -n "check <a 6 GiB sparse scenario file> (in < 5 s)" -- \
    "$BIN" check big.toml --out o
}

# ==== Issue 11 ====

# mount_tmpfs DIR SIZE: a small tmpfs (root only); false when it cannot be mounted here.
mount_tmpfs() {
  mkdir -p "$1" && mount -t tmpfs -o "size=$2" tmpfs "$1" 2>/dev/null || return 1
  MOUNTS+=("$1")
}

fill() { dd if=/dev/zero of="$1/fill" bs=4096 2>/dev/null; true; }

# 1-3. full disks: records, --json/--junit reports, compare --json and standard output.
cat_i11_disk_full() {
  need_record || return
  scratch; scenario def1.toml "${DEFAULT_MODEL[@]}"
  expect 3,2 -o o/ref_p1.h5 -g ref_p1 -n "check: the record outgrows ulimit -f 512" -- \
    "${ULIMIT[@]}" -f 512 "$BIN" check def1.toml --variant ref_p1 --allow-skipped --out o
  scratch; cp "$FIX_REC" r.h5
  expect 3 -n "info r.h5 >/dev/full" -- bash -c '"$0" info r.h5 >/dev/full' "$BIN"
  scratch; cp "$FIX_REC" r.h5
  expect 3 -n "compare r.h5 r.h5 >/dev/full" -- bash -c '"$0" compare r.h5 r.h5 >/dev/full' "$BIN"
  scratch; cp "$FIX_REC" r.h5
  expect 2 -n "compare --json /dev/full" -- "$BIN" compare r.h5 r.h5 --json /dev/full
  scratch
  if ! mount_tmpfs "$SCRATCH/mnt" 5m; then
    skip "tmpfs cases (check on a 5 MiB file system; --json, --junit and compare --json on a full one): cannot mount a tmpfs here (needs root)"
    return
  fi
  expect 2 -o mnt/o/ref_p1.h5 -n "check on a 5 MiB tmpfs (refused from the record estimate)" -- \
    "$BIN" check --variant ref_p1 --allow-skipped --out mnt/o
  local flag
  for flag in --json --junit; do
    scratch; scenario s.toml; mount_tmpfs "$SCRATCH/mnt" 64k && fill mnt
    expect 3 -o mnt/report -g "No space left" -n "check $flag <on a full tmpfs>" -- \
      "$BIN" check s.toml --variant ref_p1 --allow-skipped --out o "$flag" mnt/report
  done
  scratch; cp "$FIX_REC" r.h5; mount_tmpfs "$SCRATCH/mnt" 64k && fill mnt
  expect 3 -o mnt/c.json -n "compare --json <on a full tmpfs>" -- "$BIN" compare r.h5 r.h5 --json mnt/c.json
}

# 8. SIGTERM/SIGINT left *.h5.tmp-PID files behind: exit 128+signal, nothing left.
cat_i11_signals() {
  local sig code
  for sig in TERM INT; do
    code=$((128 + $(kill -l "$sig")))
    scratch
    expect "$code" -o o/report.json -t 120 -n "SIG$sig while check writes a record" -- \
      "$PY" "$HELPERS/signal_run.py" "$sig" o '*.h5.tmp-*' 60 "$BIN" check --out o
  done
  need_record || return
  scratch; scenario def1.toml "${DEFAULT_MODEL[@]}" training.steps=3
  expect 143 -o r.h5 -t 120 -n "SIGTERM while run writes a record" -- \
    "$PY" "$HELPERS/signal_run.py" TERM . '*.h5.tmp-*' 60 "$BIN" run def1.toml --variant ref_p1 --out r.h5
  scratch
  expect 143 -t 120 -n "SIGTERM during golden check (temporary directory)" -- \
    "$PY" "$HELPERS/signal_run.py" TERM tmpdir '*.h5*' 60 \
    "$BIN" golden check "$ROOT/scenarios/default.toml" --golden-dir "$ROOT/golden/digests"
}

# 6. unwritable outputs were found only after all the training: refused before the first variant.
cat_i11_unwritable_outputs() {
  local bad
  for bad in "--json /proc/r.json" "--junit /proc/j.xml" "--html /proc/h.html" "--json /dev/full" \
             "--junit ." "--out /proc/runs"; do
    scratch
    # shellcheck disable=SC2086
    expect 2 -T 5 -o o/ref_p4v2.h5 -n "check $bad (the embedded default scenario)" -- \
      "$BIN" check --out o $bad
  done
  scratch
  expect 2 -T 5 -n "run --out /dev/full" -- "$BIN" run --variant ref_p1 --out /dev/full
  scratch
  expect 2 -T 5 -n "run --out /proc/x.h5" -- "$BIN" run --variant ref_p1 --out /proc/x.h5
  scratch
  expect 2 -T 5 -n "equiv --json /proc/e.json" -- \
    "$BIN" equiv 'E|t*3|(t|)*5mmL' 'E|t*3|(t|)*4tmm|L' --pp 4 --json /proc/e.json
  need_record || return
  scratch; cp "$FIX_REC" r.h5
  expect 2 -T 5 -G '# ran ' -n "replay --json /dev/full" -- "$BIN" replay r.h5 --json /dev/full
  scratch; cp "$FIX_REC" r.h5
  expect 2 -T 5 -n "replay --out /proc/x.h5" -- "$BIN" replay r.h5 --out /proc/x.h5
  scratch; setup forge bench-json b.json BM_X 100 &&
    expect 2 -T 5 -n "perf merge --out /dev/full" -- "$BIN" perf merge b.json --out /dev/full
  scratch; echo text >doc.txt
  expect 2 -T 5 -n "data prepare doc.txt /proc/nowhere/ds" -- "$BIN" data prepare doc.txt /proc/nowhere/ds
}

# Corrupted records (truncated, bit-flipped, impossible sizes, extra structure) through compare,
# info and replay: a clear exit 2, never a crash or a hang. A flipped byte may land in data or
# padding, so flips accept 0/1 as well; truncation and a broken signature must be exit 2.
cat_i11_corrupted_records() {
  need_record || return
  local size cut off
  size=$(stat -c %s "$FIX_REC")
  corrupted() {  # corrupted DESCRIPTION CODES_COMPARE CODES_INFO CODES_REPLAY FORGE-ARGS...
    local what=$1 cc=$2 ci=$3 cr=$4
    shift 4
    scratch; cp "$FIX_REC" r.h5; cp "$FIX_REC" bad.h5
    setup forge "$@" || return
    expect "$cc" -n "compare --ignore-digests <$what> r.h5" -- "$BIN" compare bad.h5 r.h5 --ignore-digests
    expect "$ci" -n "info <$what>" -- "$BIN" info bad.h5
    expect "$cr" -n "replay <$what>" -- "$BIN" replay bad.h5
  }
  for cut in 0.5 0.9 4096 100; do
    corrupted "truncated to $cut" 2 2 2 truncate bad.h5 "$cut"
  done
  corrupted "HDF5 signature flipped" 2 2 2 flip bad.h5 0
  for off in 40 300 1000 3000 $((size / 4)) $((size / 2)) $((size * 3 / 4)) -100; do
    corrupted "byte $off flipped" 0,1,2 0,2 0,1,2 flip bad.h5 "$off"
  done
  scratch; cp "$FIX_REC" r.h5; cp "$FIX_REC" bad.h5
  local ds
  ds=$(dataset bad.h5 steps/000001/grad layers.0.mlp.linear_fc1.weight) && setup forge h5-huge bad.h5 "$ds" 1099511627776 &&
    expect 2 -t 60 -n "compare --ignore-digests <a grad declaring 2^40 elements>" -- \
      "$BIN" compare bad.h5 bad.h5 --ignore-digests
  scratch; cp "$FIX_REC" r.h5; cp "$FIX_REC" extra.h5
  setup forge h5-group extra.h5 steps/000003 &&
    expect 1 -n "compare r.h5 <the same with an extra empty step group> (issue 11 #4)" -- \
      "$BIN" compare r.h5 extra.h5
}

# A non-UTF-8 path where a JSON result would hold it: exit 2, nothing written.
cat_i11_non_utf8_path() {
  need_record || return
  local X=$'\xff'
  # The defect was an internal JSON exception and a 0-byte file: refusing the name (2) or writing a
  # complete report under it (0, then it must parse) are both right.
  scratch; scenario s.toml
  expect 0,2 -o "r${X}.json" -n "check --json <non-UTF-8 name>" -- \
    "$BIN" check s.toml --allow-skipped --out o --json "r${X}.json"
  [[ -e "r${X}.json" ]] &&
    expect 0 -n "that report parses as JSON" -- "$PY" "$HELPERS/forge.py" json-ok "r${X}.json"
  scratch; scenario s.toml
  expect 2 -o "d${X}" -n "check --out <non-UTF-8 name>" -- "$BIN" check s.toml --allow-skipped --out "d${X}"
  scratch; cp "$FIX_REC" "r${X}.h5"; cp "$FIX_REC" r.h5
  expect 2 -o c.json -n "compare <non-UTF-8 record> r.h5 --json c.json" -- \
    "$BIN" compare "r${X}.h5" r.h5 --json c.json
  scratch; cp "$FIX_REC" "r${X}.h5"
  expect 2 -o r.json -G '# ran ' -n "replay <non-UTF-8 record> --json r.json" -- \
    "$BIN" replay "r${X}.h5" --json r.json
  scratch; setup forge bench-json "b${X}.json" BM_X 100 &&
    expect 2 -o m.json -n "perf merge <non-UTF-8 input> --out m.json" -- "$BIN" perf merge "b${X}.json" --out m.json
}

# /proc/self/mem (and friends) as inputs: exit 2 naming the position, at once.
cat_i11_proc_self_mem() {
  scratch; scenario mem.toml data.path='"/proc/self/mem"'
  expect 2 -T 10 -g 'mem.toml:' -n "check: [data].path = /proc/self/mem" -- "$BIN" check mem.toml --out o
  scratch; scenario mem.toml data.kind='"megatron"' data.path=- data.path_prefix='"/proc/self/mem"'
  expect 2 -T 10 -g 'mem.toml:' -n "check: [data].path_prefix = /proc/self/mem" -- "$BIN" check mem.toml --out o
  scratch
  expect 2 -T 10 -n "info /proc/self/mem" -- "$BIN" info /proc/self/mem
  scratch
  expect 2 -T 10 -n "replay /proc/self/mem" -- "$BIN" replay /proc/self/mem
  scratch; setup forge bench-json b.json BM_X 100 &&
    expect 2 -T 10 -n "perf compare /proc/self/mem b.json" -- "$BIN" perf compare /proc/self/mem b.json
  scratch
  expect 2 -T 10 -n "check /proc/self/mem (as the scenario)" -- "$BIN" check /proc/self/mem --out o
}

# 7. absurd runs must be refused from the estimate in seconds, not after minutes of allocation.
cat_i11_absurd_sizes() {
  local base=$'[scenario]\nname = "big"\n[model]\n' variant=$'[[variant]]\nname = "a"\nimplementation = "reference"\n'
  scratch; printf '%shidden_size = 8192\n%s' "$base" "$variant" >h.toml
  expect 2 -o o/a.h5 -t 120 -T 10 -n "check: hidden_size = 8192" -- "$BIN" check h.toml --out o
  scratch; printf '%shidden_size = 8192\n%s' "$base" "$variant" >h.toml
  expect 2 -o o/a.h5 -t 120 -T 10 -n "check: hidden_size = 8192 --max-memory 8G" -- \
    "$BIN" check h.toml --max-memory 8G --out o
  scratch; printf '%shidden_size = 8192\n%s' "$base" "$variant" >h.toml
  expect 2 -o o/a.h5 -t 120 -T 10 -n "check: hidden_size = 8192 under ulimit -v 16000000" -- \
    "${ULIMIT[@]}" -v 16000000 "$BIN" check h.toml --out o
  scratch; printf '%smicro_batch_size = 65536\n%s' "$base" "$variant" >b.toml
  expect 2 -o b.h5 -t 120 -T 10 -n "run: micro_batch_size = 65536" -- \
    "$BIN" run b.toml --variant a --out b.h5
}

# ==== Driver ====

print_table() {
  local fmt='%-32s %5s  %-22s %6s %5s %7s %8s %8s %6s %6s %6s  %s\n'
  # shellcheck disable=SC2059
  printf "$fmt" category runs "exit codes seen" crash hang "wrong 0" partial changed "other" "msg" secs verdict
  local c failed=0 codes verdict
  for c in "${SELECTED[@]}"; do
    if [[ -z ${RUNS[$c]+x} ]]; then
      # shellcheck disable=SC2059
      printf "$fmt" "$c" - - - - - - - - - - "skipped (SLOW: FULL=1)"
      continue
    fi
    codes=$(tr ' ' '\n' <<<"${CODES[$c]}" | grep . | sort -n | uniq -c |
            awk '{ printf "%s%s", sep, ($1 > 1 ? $2 "x" $1 : $2); sep = " " }')
    local bad=$((CRASH[$c] + HANG[$c] + WRONG0[$c] + PARTIAL[$c] + CHANGED[$c] + BADCODE[$c] + BADMSG[$c]))
    if ((bad)); then verdict=FAIL; failed=1; elif ((RUNS[$c] == 0)); then verdict=skipped; else verdict=ok; fi
    # shellcheck disable=SC2059
    printf "$fmt" "$c" "${RUNS[$c]}" "${codes:--}" "${CRASH[$c]}" "${HANG[$c]}" "${WRONG0[$c]}" \
      "${PARTIAL[$c]}" "${CHANGED[$c]}" "${BADCODE[$c]}" "${BADMSG[$c]}" "${SECS[$c]}" "$verdict"
  done
  return $failed
}

main() {
  if [[ ${1:-} == --list ]]; then
    local c
    for c in "${CATEGORIES[@]}"; do echo "$c${SLOW[$c]:+ (SLOW: FULL=1)}"; done
    exit 0
  fi
  if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit 0
  fi
  SELECTED=()
  local c
  if (($#)); then
    for c in "$@"; do
      [[ " ${CATEGORIES[*]} " == *" $c "* ]] || die "unknown category '$c' (--list names them)"
      SELECTED+=("$c")
    done
  else
    SELECTED=("${CATEGORIES[@]}")
  fi

  BIN=${MTP_HARNESS:-}
  if [[ -z $BIN ]]; then
    BIN=$ROOT/build/harness/cli/mtp-harness
    [[ -x $BIN ]] || BIN=$ROOT/build/mtp-harness
  fi
  [[ -x $BIN ]] || die "no mtp-harness binary at '$BIN' (build it, or set MTP_HARNESS=path)"
  BIN=$(realpath "$BIN")
  PY=${PYTHON:-}
  if [[ -z $PY ]]; then
    for c in python3 /usr/bin/python3; do
      if command -v "$c" >/dev/null && "$c" -c 'import h5py, numpy' 2>/dev/null; then PY=$(command -v "$c"); break; fi
    done
  fi
  [[ -n $PY ]] || die "needs python3 with h5py and numpy (Debian: apt-get install python3-h5py; or PYTHON=...)"

  WORK=$(mktemp -d "${TMPDIR:-/tmp}/mtp-adversarial.XXXXXX") || die "mktemp -d failed"
  mkdir -p "$WORK/logs"
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  echo "# mtp-harness fault campaign (issues 19 and 11): $BIN"
  echo "# scratch: $WORK; python: $PY; started $(date -u +%FT%TZ)"
  local t_all=$SECONDS t0
  for c in "${SELECTED[@]}"; do
    if [[ -n ${SLOW[$c]:-} && $FULL != 1 ]]; then continue; fi
    printf '# %-32s ' "$c" >&2
    begin_category "$c"
    t0=$SECONDS
    "cat_${c//-/_}"
    cd "$WORK" || true
    SECS[$c]=$((SECONDS - t0))
    printf '%3d runs, %4d s\n' "${RUNS[$c]}" "${SECS[$c]}" >&2
  done
  echo
  local status=0
  print_table || status=1
  echo
  echo "# $((SECONDS - t_all)) s in all ($((NSCRATCH)) scratch directories)$([[ $KEEP == 1 ]] && echo "; every run: $WORK/runs.log, outputs in $WORK/logs")"
  for c in "${SELECTED[@]}"; do
    [[ -n ${SKIPPED[$c]:-} ]] && echo "# skipped in $c: ${SKIPPED[$c]}"
  done
  if ((${#DETAILS[@]})); then
    echo
    echo "Failures:"
    printf '  %s\n' "${DETAILS[@]}"
    status=1
  fi
  return $status
}

cleanup() {
  local m
  cd / || true
  for m in "${MOUNTS[@]}"; do umount -l "$m" 2>/dev/null; done
  if [[ $KEEP == 1 ]]; then
    echo "# kept $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}

main "$@"
