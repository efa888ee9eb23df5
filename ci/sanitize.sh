#!/usr/bin/env bash
# The sanitizer and fuzz job. Builds the torch-free libraries that read untrusted input (layout
# strings, HDF5 records, corpora, Megatron datasets, scenarios, goldens, benchmark JSON, replayed
# records: harness/common, layout, schedule, config, perf, record, compare, golden, data,
# scenario, replay) with clang, AddressSanitizer and UndefinedBehaviorSanitizer into build-san/,
# runs their tests, then runs each libFuzzer target from its checked-in seed corpus
# (<folder>/fuzz_corpus/<target>/): the first three for FUZZ_SECONDS (default 60) each, the four
# of issue 19 (Megatron index, goldens, benchmark JSON, replay's record reader) for
# FUZZ_SECONDS_NEW (default 30, or FUZZ_SECONDS when that is less) each, so that the job stays
# near 10 minutes on 2 cores. A finding (crash, sanitizer report, uncaught exception, leak,
# timeout) is saved to build-san/fuzz-findings/ and fails the job.
# Usage: ci/sanitize.sh   (after ci/setup.sh; FUZZ_SECONDS=N, FUZZ_SECONDS_NEW=N change the times)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
secs_new=${FUZZ_SECONDS_NEW:-$(( secs < 30 ? secs : 30 ))}
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/ci/lsan.supp:print_suppressions=0
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer

CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMTP_TORCH_FREE=ON -DMTP_FUZZ=ON -DMTP_BUILD_BENCHMARKS=OFF
cmake --build build-san -j "$(nproc)"
ctest --test-dir build-san --output-on-failure -j "$(nproc)" --timeout 600

mkdir -p build-san/fuzz-findings
for entry in harness/layout/layout_fuzzer:$secs harness/record/record_reader_fuzzer:$secs \
             harness/scenario/scenario_fuzzer:$secs \
             harness/data/indexed_dataset_fuzzer:$secs_new harness/golden/golden_fuzzer:$secs_new \
             harness/perf/benchmark_json_fuzzer:$secs_new \
             harness/replay/record_run_fuzzer:$secs_new; do
  target=${entry%:*}
  fuzz_secs=${entry##*:}
  name=$(basename "$target")
  seeds=$(dirname "$target")/fuzz_corpus/$name
  work=build-san/fuzz/$name  # inputs found in this run; the checked-in seeds stay as they are
  rm -rf "$work" && mkdir -p "$work"
  echo "ci/sanitize.sh: fuzzing $name for ${fuzz_secs} s from $seeds"
  # allocator_may_return_null: an absurd size read from corrupt HDF5 metadata makes malloc return
  # NULL inside libhdf5 (which reports an error), as glibc does, instead of an ASan abort; our
  # own code checks declared sizes first, and a std::bad_alloc escaping it is still a finding.
  if ! ASAN_OPTIONS=$ASAN_OPTIONS:allocator_may_return_null=1 \
       "build-san/$target" "$work" "$seeds" -max_total_time="$fuzz_secs" -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="build-san/fuzz-findings/$name-" -print_final_stats=1 \
       > "build-san/fuzz/$name.log" 2>&1; then
    tail -80 "build-san/fuzz/$name.log"
    echo "ci/sanitize.sh: $name found a defect (input saved in build-san/fuzz-findings/)"
    exit 1
  fi
  grep -E '^(Done|stat::)' "build-san/fuzz/$name.log"
done
echo "ci/sanitize.sh: sanitizer tests and fuzzers passed"
