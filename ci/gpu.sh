#!/usr/bin/env bash
# The one command for the GPU machine (see ../shared/device/README.md): unpack the carried
# Debian packages, configure against the CUDA LibTorch, build, run every test (GPU ones too),
# run the scenarios on the GPU, the two-process NCCL runs and the benchmarks (compared with the
# perf baseline of the card, golden/perf/<card>.json such as h200.json, by `mtp-harness perf
# compare`), and write logs and results
# to OUT_DIR (summary.txt, the benchmark JSON, results.tar.gz).
# Usage: ci/gpu.sh OUT_DIR        (needs .device-debs/ from ../shared/device/fetch-debs.sh)
#   MTP_GPU_PARTS: which parts to run after the build, comma-separated, default all of
#   tests,scenarios,p2,bench,records (the build always runs). One device call holds at most 10
#   minutes: run tests,scenarios,p2 in one call and bench and records in the next ones (the
#   build folder stays while the machine is warm). Parts not in the default:
#     matrix   every BM_PipelineStep CUDA row and BM_Attention, one repetition, into JSON
#              (golden/perf/RESULTS.md's tables)
#     profile  Chrome traces (Kineto: CUDA kernels and CPU operators) of the steps named by
#              MTP_PROFILE_FILTER, into OUT_DIR/traces.tar.gz, each one's top kernels in the
#              summary (ci/trace/trace_kernels.py); MTP_PROFILE_NONDET=1: the same steps again with
#              deterministic algorithms off, and each one's kernels against the deterministic
#              trace's (--diff)
#     graphs   CUDA graphs: the graph-vs-eager and flash tests (one stage and pipelined),
#              gpu_flash.toml, and the P = 1 and P4 V2 bf16 rows of BM_PipelineStep with and
#              without graphs, both placements (MTP_GRAPHS_FILTER)
#     digest   the default scenario on the GPU with full records and with digest-only records
#              (digests computed on the GPU): every tensor must compare EQUAL by digests; then
#              kernels_benchmark's BM_BlockSummaries(List) rows and BM_TrainStep's small P = 1
#              rows (eager and graphed) with and without a digest record (MTP_DIGEST_FILTER;
#              MTP_BENCH_REPETITIONS, default 3)
#     diag     commands that crashed on this machine before (golden check, replay), with the
#              crash handler's backtrace resolved by addr2line
#     ab       same-machine A/B of a base commit against this tree: builds the base's source
#              (a folder given as MTP_AB_BASE_DIR, carried with the tree, e.g. made here with
#              `mkdir -p .ab-base && git archive BASE | tar -x -C .ab-base` and carried as
#              .ab-base) into build-gpu-base, then `mtp-harness perf ab` of its
#              train_step_benchmark against this build's (MTP_AB_FILTER, default the small
#              model's P = 1 bf16 rows; MTP_AB_ROUNDS, default 5); with MTP_AB_KERNELS_FILTER
#              set, the same for kernels_benchmark's rows it matches
#     calibrate the pipeline cost simulator's node costs (issue 23): `mtp-harness calibrate` of
#              the dsv3 and small presets into OUT_DIR/costs_{dsv3,small}.json, and, to validate
#              them, BM_PipelineStep of the small model at P = 1 (bf16, flash, harness kernels)
#              against `simulate` of the same step from the small costs
#     validate the simulator against measured runs (issue 23 §3): `calibrate --validate` of the
#              small and tiny presets, P4 V2 with ranks as threads, co-located (reference) and
#              standalone (candidate) MTP: each rank's measured op sum (CUDA events, computes
#              one at a time) against the simulated busy time from the costs calibrated in the
#              same command (exit 1 when a rank is off by more than 10 %); then the small
#              preset's two layouts again with --cuda-graphs, against costs calibrated with
#              --cuda-graphs (graphed stage ops) in that command, and eager against costs
#              read off eager stage ops (--from-stages)
#     cp       context and expert parallelism (issue 24): scenarios/cp_ep.toml with every rank as
#              a thread on the one GPU (float64), twice (the runs must be identical), and each
#              variant's GPU record against its CPU-thread record (rel_l2:1e-9: cuBLAS and
#              OpenBLAS round float64 differently; the measured worst is printed); on a machine
#              with several GPUs, each variant whose ranks fit over NCCL (torchrun, and a thread
#              per GPU), bitwise against its ranks-as-threads record
#     anchor   the PyTorch anchor (issue 25 §1, ci/torch_anchor/README.md): the anchor's model
#              checked against the harness's record (anchor.py check, compare rel_l2:1e-5),
#              then BM_PipelineStep's bf16 flash harness-kernel rows of both sizes (P = 1, CUDA
#              graphs, P4 V2; reference and candidate; MTP_BENCH_REPETITIONS, default 5) and
#              each anchor case (MTP_ANCHOR_CASES, default small:eager small:compile
#              tiny:eager tiny:compile) in a fresh process, and the table of every harness row's
#              ratio to the anchors of the same job (OUT_DIR/anchor_table.md, JSON beside it),
#              with the small model's whole step with digest records over the step without
#              (BM_TrainStep, P = 1 eager and graphed) and each P = 1 row's step time with
#              deterministic algorithms on over the same row's with them off
#              (MTP_BENCH_DETERMINISTIC=0, same job)
#     megatron the Megatron-LM recorder (ci/megatron_recorder/README.md), with a Megatron-LM tree
#              carried at build-megatron/Megatron-LM (megatron/ and REVISION): Megatron trains
#              ci/megatron_recorder/source.toml's run for 3 steps both ways (--init harness,
#              --init megatron) into OUT_DIR/megatron_train_*_init.h5; this build replays both on
#              cuda and cpu, and the harness's own run is compared with Megatron's (rel_l2:1e-5).
#              MTP_MEGATRON_SOURCE: the source record (default: made here on the CPU)
#   MTP_CTEST_REGEX: run only the tests matching it (part tests). MTP_SKIP_COMPARE_BENCH and
#   MTP_RECORD_ROWS (e.g. 'record:(none|digest)') shorten part records.
set -uo pipefail
parts=",${MTP_GPU_PARTS:-tests,scenarios,p2,bench,records},"
want() { [[ $parts == *",$1,"* ]]; }
out=${1:?usage: ci/gpu.sh OUT_DIR}
cd "$(dirname "$0")/.."
mkdir -p "$out" /tmp/pfx
work=$(mktemp -d /tmp/mtp-gpu.XXXX)
log=$work/logs
mkdir -p "$log"
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
step() {  # step NAME COMMAND...: run, log, record the exit code
  local name=$1; shift
  local t0=$(date +%s%N)
  "$@" > "$log/$name.log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  say "$(printf '%-34s rc=%-3s %8d ms' "$name" "$rc" "$ms")"
  return $rc
}

for f in .device-debs/*.deb; do dpkg -x "$f" /tmp/pfx; done
export LD_LIBRARY_PATH=/tmp/pfx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
nccl_root=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || echo /usr)
say "# mtp-harness GPU run $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee -a "$summary"
ngpu=$(nvidia-smi -L | wc -l)

build=build-gpu
# benchmark_DIR pinned: an H200 image of 2026-12-06 has Google Benchmark 1.8.3 in /usr, whose
# config CMake found before the brought 1.7.1 one, so the programs compiled against 1.7.1's
# headers linked against 1.8.3 (undefined benchmark::State::SkipWithError(char const*)).
step configure cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNCCL_ROOT="$nccl_root" \
  -DCMAKE_PREFIX_PATH="$torch_prefix;/tmp/pfx/usr;/tmp/pfx/usr/share" \
  -Dbenchmark_DIR=/tmp/pfx/usr/lib/x86_64-linux-gnu/cmake/benchmark || { tail -40 "$log/configure.log" | tee -a "$summary"; }
if ! step build cmake --build $build -j "$(nproc)" -- -k 0; then
  grep -E "error|FAILED" "$log/build.log" | head -60 | tee -a "$summary"
  tar -C "$work" -czf "$out/results.tar.gz" logs
  exit 1
fi
B=$build/mtp-harness
if want tests; then
# The goldens (golden.*) hold CPU digests of this project's Debian environment: another LibTorch
# and BLAS make other bits, and golden check refuses them by design, so they are left out here.
# (--output-log writes as it goes: a run stopped at the device call's limit still returns it.)
step ctest ctest --test-dir $build --output-on-failure -j "$(nproc)" --timeout 300 -LE golden \
  ${MTP_CTEST_REGEX:+-R "$MTP_CTEST_REGEX"} --output-log "$out/ctest.log"
grep -E "tests passed|tests failed|\(Failed\)|\(SEGFAULT\)|Not Run" "$log/ctest.log" | tail -15 | tee -a "$summary"
fi

R=$work/runs
if want scenarios; then
# 1. The default scenario with all ranks on one GPU, twice: expectations hold, runs identical.
step default_cuda_a $B check scenarios/default.toml --device cuda --out $R/default_a
step default_cuda_b $B check scenarios/default.toml --device cuda --out $R/default_b
grep -E "PASS|FAIL|expectation\(s\)" "$log/default_cuda_a.log" | tee -a "$summary"
for f in $R/default_a/*.h5; do
  step "rerun_$(basename $f .h5)" $B compare $f $R/default_b/$(basename $f) --records batch,loss,grad,weight
done
# 2. MoE / combined 1F1B / overlapped p2p on the GPU.
step overlap_cuda $B check scenarios/overlap.toml --device cuda --out $R/overlap
grep -E "PASS|FAIL|expectation\(s\)" "$log/overlap_cuda.log" | tee -a "$summary"
# 2b. Data parallelism (DP = 2 x P = 2 and P = 4 V = 2, distributed Adam, tied embeddings) with
#     every rank as a thread on one GPU.
step data_parallel_cuda $B check scenarios/data_parallel.toml --device cuda --out $R/data_parallel
grep -E "PASS|FAIL|expectation\(s\)" "$log/data_parallel_cuda.log" | tee -a "$summary"
# 2c. bf16 with fp32 main grads and masters (placements, schedules, P = 1, DP = 2) on the GPU,
#     with the flash-attention variants enabled there.
# 2d. Uneven masks across data-parallel ranks with the per-token loss, and the #7452 control.
step uneven_masks_cuda $B check scenarios/uneven_masks.toml --device cuda --out $R/uneven_masks
grep -E "PASS|FAIL|CAUGHT|MISSED|expectation\(s\)" "$log/uneven_masks_cuda.log" | tee -a "$summary"
# 2e. MTP depths split over stages (candidate/split/) vs with the loss vs standalone, untied and tied.
step mtp_placements_cuda $B check scenarios/mtp_placements.toml --device cuda --out $R/mtp_placements
grep -E "PASS|FAIL|expectation\(s\)" "$log/mtp_placements_cuda.log" | grep -v "vs oracle" | tee -a "$summary"
step bf16_cuda $B check scenarios/bf16.toml --device cuda --out $R/bf16
grep -E "PASS|FAIL|expectation\(s\)" "$log/bf16_cuda.log" | tee -a "$summary"
# 2f. The harness's own attention kernel (the CPU scenario, here on the GPU).
step harness_attention_cuda $B check scenarios/harness_attention.toml --device cuda \
  --out $R/harness_attention
grep -E "PASS|FAIL|expectation\(s\)" "$log/harness_attention_cuda.log" | grep -v "vs oracle" | tee -a "$summary"
step gpu_flash $B check scenarios/gpu_flash.toml --out $R/gpu_flash
grep -E "PASS|FAIL|expectation\(s\)|error" "$log/gpu_flash.log" | tee -a "$summary"
step gpu_flash_rerun $B check scenarios/gpu_flash.toml --out $R/gpu_flash_b --variant ref_p4v2 --variant cand_p4v2_tm --allow-skipped
step gpu_flash_rerun_cmp $B compare $R/gpu_flash/ref_p4v2.h5 $R/gpu_flash_b/ref_p4v2.h5 --records batch,loss,grad,weight,model_weight
grep -E "EQUAL|DIFFERENT|first divergence" "$log/gpu_flash_rerun_cmp.log" | sed "s/^/  flash rerun: /" | tee -a "$summary"
# 3. GPU against CPU, same scenario: a tolerance, with the measured maximum error.
step default_cpu $B check scenarios/default.toml --device cpu --out $R/default_cpu
for v in ref_p4v2 cand_p4v2_tmm ref_p1; do
  step "gpu_vs_cpu_$v" $B compare $R/default_a/$v.h5 $R/default_cpu/$v.h5 --class tol:1e-3,1e-5 --records loss,grad,weight
  grep -E "EQUAL|DIFFERENT|observed|first divergence" "$log/gpu_vs_cpu_$v.log" | sed "s/^/  $v: /" | tee -a "$summary"
done
fi
if want cp; then
# 2f. Context parallelism on the GPU, ranks as threads: expectations, a rerun, GPU vs CPU.
step cp_ep_cuda $B check scenarios/cp_ep.toml --device cuda --out $R/cp_ep
grep -E "PASS|FAIL|expectation\(s\)" "$log/cp_ep_cuda.log" | grep -v "vs oracle" | tee -a "$summary"
step cp_ep_cuda_b $B check scenarios/cp_ep.toml --device cuda --out $R/cp_ep_b
step cp_ep_cpu $B check scenarios/cp_ep.toml --device cpu --out $R/cp_ep_cpu
for f in $R/cp_ep/*.h5; do
  v=$(basename $f .h5)
  step "cp_rerun_$v" $B compare $f $R/cp_ep_b/$v.h5 --records batch,loss,grad,weight
  grep -E "^EQUAL|^DIFFERENT" "$log/cp_rerun_$v.log" | sed "s/^/  $v rerun: /" | tee -a "$summary"
  step "cp_gpu_vs_cpu_$v" $B compare $f $R/cp_ep_cpu/$v.h5 --class rel_l2:1e-9 --records loss,grad,weight
  grep -E "^EQUAL|^DIFFERENT|^verdict|worst relative" "$log/cp_gpu_vs_cpu_$v.log" | head -2 | sed "s/^/  $v gpu vs cpu: /" | tee -a "$summary"
done
# Over NCCL, one rank per GPU (torchrun processes, then one process with a thread per GPU): every
# variant whose world size (DP x CP x P, `run --world-size`) fits this machine's GPUs; each record
# must be bitwise equal to the same variant's ranks-as-threads record on one GPU.
port=29811
not_nccl=()
for f in $R/cp_ep/*.h5; do
  v=$(basename $f .h5)
  if ! world=$($B run scenarios/cp_ep.toml --variant $v --world-size 2>> "$log/cp_world_size.log"); then
    say "  $v: run --world-size failed (logs/cp_world_size.log)"
    continue
  fi
  if [ "$world" -gt "$ngpu" ]; then
    not_nccl+=("$v ($world ranks)")
    continue
  fi
  port=$((port + 2))
  step "cp_nccl_$v" python3 -m torch.distributed.run --nproc_per_node $world --master_port $port \
    --no-python $B run scenarios/cp_ep.toml --variant $v --device cuda --launcher env \
    --out $R/cp_ep_nccl/$v.h5 --timeout 300
  step "cp_nccl_vs_threads_$v" $B compare $R/cp_ep_nccl/$v.h5 $f --records batch,loss,grad,weight
  grep -E "^EQUAL|^DIFFERENT|first divergence" "$log/cp_nccl_vs_threads_$v.log" | sed "s/^/  $v nccl vs threads: /" | tee -a "$summary"
  step "cp_thread_per_gpu_$v" $B run scenarios/cp_ep.toml --variant $v --device cuda --launcher threads \
    --port $((port + 1)) --out $R/cp_ep_tpg/$v.h5 --timeout 300
  step "cp_thread_per_gpu_vs_threads_$v" $B compare $R/cp_ep_tpg/$v.h5 $f --records batch,loss,grad,weight
  grep -E "^EQUAL|^DIFFERENT|first divergence" "$log/cp_thread_per_gpu_vs_threads_$v.log" | sed "s/^/  $v thread per GPU vs threads: /" | tee -a "$summary"
done
[ ${#not_nccl[@]} -gt 0 ] && say "cp over NCCL: $ngpu GPU(s), not run: ${not_nccl[*]}"
fi
if want p2; then
# 4. P = 2: threads on one GPU vs one process per GPU (torchrun, NCCL).
step gpu_p2_threads $B check scenarios/gpu_p2.toml --device cuda --out $R/p2_threads
grep -E "PASS|FAIL|expectation\(s\)" "$log/gpu_p2_threads.log" | tee -a "$summary"
if [ "$ngpu" -ge 2 ]; then
  port=29611
  for v in ref_p2v2 cand_p2v2 cand_p2_1f1b; do
    port=$((port + 2))
    step "torchrun_$v" python3 -m torch.distributed.run --nproc_per_node 2 --master_port $port \
      --no-python $B run scenarios/gpu_p2.toml --variant $v --device cuda --launcher env \
      --out $R/p2_nccl/$v.h5 --timeout 120
    step "nccl_vs_threads_$v" $B compare $R/p2_nccl/$v.h5 $R/p2_threads/$v.h5 --records batch,loss,grad,weight
    grep -E "EQUAL|DIFFERENT|first divergence" "$log/nccl_vs_threads_$v.log" | sed "s/^/  $v: /" | tee -a "$summary"
    # The second launch mode: one process, one thread per GPU, NCCL.
    port=$((port + 1))
    step "thread_per_gpu_$v" $B run scenarios/gpu_p2.toml --variant $v --device cuda --launcher threads \
      --port $port --out $R/p2_tpg/$v.h5 --timeout 120
    step "thread_per_gpu_vs_processes_$v" $B compare $R/p2_tpg/$v.h5 $R/p2_nccl/$v.h5 --records batch,loss,grad,weight
    grep -E "EQUAL|DIFFERENT|first divergence" "$log/thread_per_gpu_vs_processes_$v.log" | sed "s/^/  $v (thread per GPU vs processes): /" | tee -a "$summary"
  done
else
  say "only $ngpu GPU: the two-process NCCL runs were not run"
fi
fi
# 5. Benchmarks (Google Benchmark, CUDA rows) with repetitions into JSON, then `perf compare`
#    against the committed baseline of the card, golden/perf/<card>.json (RESULTS.md, "Perf
#    baselines"). About 4 minutes on one H200: kernels_benchmark's CUDA rows at 0.05 s per
#    repetition; of train_step_benchmark the BM_PipelineStep rows below (the small model in
#    bf16 with flash and unfused attention at P = 1 (with and without CUDA graphs) and P4 V2,
#    the candidate, LibTorch kernels, fp32; the tiny model in fp32 and bf16 + flash, and with
#    CUDA graphs). BM_TrainStep (whole steps with the HDF5
#    record, ~2 GB per small-model step) and the full matrix are left to manual runs.
#    MTP_BENCH_REPETITIONS (default 5: the smallest p-value of 5 vs 5 is 0.012 < alpha 0.05; 3
#    could never flag a regression) and MTP_BENCH_TRAIN_FILTER override the choices.
if want bench; then
gpu_ctx="gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1),driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
reps=${MTP_BENCH_REPETITIONS:-5}
train_filter=${MTP_BENCH_TRAIN_FILTER:-'BM_PipelineStep/(small/(p1|p1graphs|p4v2)/bf16/(unfused|flash)/reference/harness|small/p4v2/bf16/flash/(candidate/harness|reference/torch)|small/p4v2graphs/bf16/flash/(reference|candidate)/harness|small/p4v2/fp32/unfused/reference/harness|tiny/(p1|p4v2)/(fp32/unfused|bf16/flash)/reference/harness|tiny/(p1graphs|p4v2graphs)/bf16/flash/reference/harness)/cuda/'}
step bench_kernels timeout 300 $build/kernels_benchmark --benchmark_filter=/cuda/ \
  --benchmark_min_time=0.05 --benchmark_repetitions=$reps --benchmark_display_aggregates_only=true \
  --benchmark_context="$gpu_ctx" --benchmark_out=$work/kernels_benchmark.json --benchmark_out_format=json
grep -E "^BM_.*_median" "$log/bench_kernels.log" >> "$summary"
step bench_train_step env TMPDIR=/tmp timeout 420 $build/train_step_benchmark \
  --benchmark_filter="$train_filter" --benchmark_repetitions=$reps \
  --benchmark_display_aggregates_only=true --benchmark_context="$gpu_ctx" \
  --benchmark_out=$work/train_step_benchmark.json --benchmark_out_format=json
grep -E "^BM_.*_median" "$log/bench_train_step.log" >> "$summary"
# One file for both programs (what a baseline holds), then the comparison.
if step perf_merge $B perf merge $work/kernels_benchmark.json $work/train_step_benchmark.json \
     --out $work/bench.json; then
  # One baseline per card model (a baseline holds only for the machine it was measured on:
  # perf compare refuses another GPU's): golden/perf/h200.json, golden/perf/h100.json, ...
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE '\b[A-Z][0-9]{2,4}\b' | head -1 | tr 'A-Z' 'a-z')
  baseline=golden/perf/${card:-gpu}.json
  if [ -f "$baseline" ]; then
    step perf_compare $B perf compare "$baseline" $work/bench.json \
      --json $work/perf_compare.json
    cat "$log/perf_compare.log" >> "$summary"
  else
    cp $work/bench.json "$out/$(basename "$baseline")"
    say "no baseline $baseline: this run's $(basename "$baseline") (in OUT_DIR) is the candidate baseline; commit it as $baseline"
  fi
fi
fi
# CUDA graphs (engine/microbatch_graph.h, engine/chunk_graphs.h) and the flash battery: graphs vs
# eager bitwise, the scenario's graphs expectations, and the rows with and without graphs.
if want graphs; then
step graphs_ctest ctest --test-dir $build --output-on-failure --timeout 300 \
  -R 'MicrobatchGraph|ChunkGraphs|CudaGraphsPlan|FlashAttention|KernelOpsCuda|KernelsCuda' --output-log "$out/ctest_graphs.log"
grep -E "tests passed|tests failed|\(Failed\)|Skipped" "$out/ctest_graphs.log" | tail -8 | tee -a "$summary"
step graphs_gpu_flash $B check scenarios/gpu_flash.toml --out $R/graphs_gpu_flash
tail -25 "$log/graphs_gpu_flash.log" >> "$summary"
step graphs_bench env TMPDIR=/tmp timeout 300 $build/train_step_benchmark \
  --benchmark_filter="${MTP_GRAPHS_FILTER:-BM_PipelineStep/(small|tiny)/(p1|p1graphs|p4v2|p4v2graphs)/bf16/flash/(reference|candidate)/harness/cuda}" \
  --benchmark_out=$work/graphs_bench.json --benchmark_out_format=json
grep -E "^BM_" "$log/graphs_bench.log" >> "$summary"
fi
if want calibrate; then
step calibrate_dsv3 $B calibrate --preset dsv3 --out $out/costs_dsv3.json
cat "$log/calibrate_dsv3.log" >> "$summary"
step calibrate_small $B calibrate --preset small --out $out/costs_small.json
cat "$log/calibrate_small.log" >> "$summary"
step calibrate_bench env TMPDIR=/tmp timeout 300 $build/train_step_benchmark \
  --benchmark_filter='BM_PipelineStep/small/p1/bf16/flash/(reference|candidate)/harness/cuda' \
  --benchmark_repetitions=3 --benchmark_display_aggregates_only=true
grep -E "^BM_.*_median" "$log/calibrate_bench.log" >> "$summary"
step calibrate_simulate $B simulate --preset small --costs $out/costs_small.json --pp 1 \
  --microbatches 8 --layout 'Et*8mL'
head -4 "$log/calibrate_simulate.log" >> "$summary"
fi
if want validate; then
step validate_small $B calibrate --preset small --out $out/costs_small_validate.json --pp 4 \
  --validate 'E|t*3|(t|)*5mL' --validate 'E|t*3|(t|)*4tm|L'
cat "$log/validate_small.log" >> "$summary"
# The same layouts with every chunk's forward and backward replayed as CUDA graphs: the ops'
# device time without the host's (the eager runs are host-bound), against costs timed the same
# way (calibrate --cuda-graphs: graphed pipelined stages, cli/calibrate_graphs.h).
step validate_small_graphs $B calibrate --preset small --cuda-graphs \
  --out $out/costs_small_graphed.json --pp 4 --validate 'E|t*3|(t|)*5mL' --validate 'E|t*3|(t|)*4tm|L'
cat "$log/validate_small_graphs.log" >> "$summary"
# The same layouts eager, against costs read off eager pipelined stage ops with ranks as threads
# (calibrate --from-stages): the host's issue time on a rank thread, which the eager ops pay.
step validate_small_stages $B calibrate --preset small --from-stages \
  --out $out/costs_small_stages.json --pp 4 --validate 'E|t*3|(t|)*5mL' --validate 'E|t*3|(t|)*4tm|L'
cat "$log/validate_small_stages.log" >> "$summary"
step validate_tiny $B calibrate --preset tiny --out $out/costs_tiny_validate.json --pp 4 \
  --validate 'E|t|t|t|t|||mL' --validate 'E|t|t|t|t||m|L'
cat "$log/validate_tiny.log" >> "$summary"
fi
if want diag; then
# A crash prints "binary(+offset) [address]" frames (harness/common/temp_file.cc); name them.
resolve() {
  grep -o "mtp-harness(+0x[0-9a-f]*)" "$1" | grep -o "0x[0-9a-f]*" |
    xargs -r addr2line -f -C -i -e $B | paste - - | head -40 >> "$1"
}
step diag_golden $B golden check scenarios/default.toml --golden-dir $work/no-goldens
resolve "$log/diag_golden.log"
# The debugger's view of the same crash (cuda-gdb debugs host code too).
if command -v cuda-gdb > /dev/null; then
  step diag_gdb timeout 180 cuda-gdb -batch -ex run -ex "bt 40" -ex "info registers rip" \
    -ex "x/4i \$pc" --args $B golden check scenarios/default.toml --golden-dir $work/no-goldens
  grep -v -E "^\[(New |Thread |Switching|Detaching)" "$log/diag_gdb.log" | tail -60 |
    sed 's/^/  gdb: /' | tee -a "$summary"
fi
tail -45 "$log/diag_golden.log" | sed 's/^/  golden: /' | tee -a "$summary"
step diag_record $B run scenarios/default.toml --variant cand_p4v2_tmm --save-optimizer-state \
  --out $R/diag/full.h5
step diag_replay $B replay $R/diag/full.h5
resolve "$log/diag_replay.log"
tail -45 "$log/diag_replay.log" | sed 's/^/  replay: /' | tee -a "$summary"
fi
if want digest; then
step digest_full $B check scenarios/default.toml --device cuda --record full --out $R/digest_full -q
step digest_only $B check scenarios/default.toml --device cuda --record digest --out $R/digest_only -q
grep -E "expectation\(s\)" "$log/digest_only.log" | sed 's/^/  digest-only records: /' | tee -a "$summary"
for f in $R/digest_full/*.h5; do
  v=$(basename $f .h5)
  step "digest_vs_full_$v" $B compare $R/digest_only/$v.h5 $f --records batch,loss,grad,weight
  grep -E "EQUAL|DIFFERENT|decided by digests|first divergence" "$log/digest_vs_full_$v.log" | sed "s/^/  $v: /" | tee -a "$summary"
done
# What a digest record costs: the summary kernels on one tensor and on a list (one call per
# tensor against one call for the list), and the small model's step with a digest record
# against the same step without one (issue 25: <= 1.05), medians of MTP_BENCH_REPETITIONS.
step digest_kernels timeout 120 $build/kernels_benchmark --benchmark_filter='BM_(CopyBandwidth|BlockSummaries|BlockSummariesList)/cuda' \
  --benchmark_out=$work/digest_kernels.json --benchmark_out_format=json
grep -E "^BM_" "$log/digest_kernels.log" >> "$summary"
step digest_step env TMPDIR=/tmp timeout 300 $build/train_step_benchmark \
  --benchmark_filter="${MTP_DIGEST_FILTER:-BM_TrainStep/small/(p1|p1graphs)/bf16/flash/reference/harness/cuda/record:(none|digest)/}" \
  --benchmark_repetitions=${MTP_BENCH_REPETITIONS:-3} --benchmark_display_aggregates_only=true \
  --benchmark_out=$work/digest_step.json --benchmark_out_format=json
grep -E "^BM_.*_median" "$log/digest_step.log" >> "$summary"
fi
if want matrix; then
gpu_ctx="gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1),driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
step matrix_pipeline_step env TMPDIR=/tmp timeout 300 $build/train_step_benchmark \
  --benchmark_filter="${MTP_MATRIX_FILTER:-BM_PipelineStep/.*/cuda/}" --benchmark_context="$gpu_ctx" \
  --benchmark_out=$work/matrix_pipeline_step.json --benchmark_out_format=json
grep -E "^BM_" "$log/matrix_pipeline_step.log" >> "$summary"
step matrix_attention timeout 120 $build/kernels_benchmark --benchmark_filter='BM_Attention/.*/cuda/' \
  --benchmark_context="$gpu_ctx" --benchmark_out=$work/matrix_attention.json --benchmark_out_format=json
grep -E "^BM_" "$log/matrix_attention.log" >> "$summary"
fi
if want profile; then
mkdir -p $work/traces
step profile env TMPDIR=/tmp MTP_BENCH_TRACE_DIR=$work/traces timeout 300 $build/train_step_benchmark \
  --benchmark_filter="${MTP_PROFILE_FILTER:-BM_PipelineStep/(small|tiny)/p1/bf16/flash/reference/harness/cuda}"
grep -E "^BM_" "$log/profile.log" >> "$summary"
for t in $work/traces/*.trace.json; do
  [ -f "$t" ] && python3 ci/trace/trace_kernels.py "$t" --top 25 >> "$summary"
done
# The same rows with LibTorch's deterministic algorithms off, and each trace's kernels against
# its deterministic counterpart's (what determinism costs, kernel by kernel).
if [ "${MTP_PROFILE_NONDET:-0}" = 1 ]; then
  mkdir -p $work/traces_nondet
  step profile_nondet env TMPDIR=/tmp MTP_BENCH_DETERMINISTIC=0 MTP_BENCH_TRACE_DIR=$work/traces_nondet \
    timeout 300 $build/train_step_benchmark \
    --benchmark_filter="${MTP_PROFILE_FILTER:-BM_PipelineStep/(small|tiny)/p1/bf16/flash/reference/harness/cuda}"
  grep -E "^BM_" "$log/profile_nondet.log" | sed 's/^/(non-deterministic) /' >> "$summary"
  for t in $work/traces_nondet/*.trace.json; do
    [ -f "$t" ] && python3 ci/trace/trace_kernels.py "$t" $work/traces/$(basename "$t") --diff \
      --top 25 | sed 's/^/(A non-det, B det) /' >> "$summary"
  done
fi
tar -C $work -czf "$out/traces.tar.gz" traces $(cd $work && ls -d traces_nondet 2>/dev/null)
fi
if want ab; then
base_src=${MTP_AB_BASE_DIR:-.ab-base}
if [ ! -f "$base_src/CMakeLists.txt" ]; then
  say "ab: no base source tree at $base_src (see the part's comment at the top)"
else
  step ab_configure cmake -S "$base_src" -B build-gpu-base -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNCCL_ROOT="$nccl_root" -DMTP_BUILD_TESTS=OFF \
    -DCMAKE_PREFIX_PATH="$torch_prefix;/tmp/pfx/usr;/tmp/pfx/usr/share"
  step ab_build cmake --build build-gpu-base -j "$(nproc)" --target train_step_benchmark
  step ab $B perf ab build-gpu-base/train_step_benchmark $build/train_step_benchmark \
    --filter "${MTP_AB_FILTER:-BM_PipelineStep/small/p1/bf16/flash/.*/harness/cuda}" \
    --rounds "${MTP_AB_ROUNDS:-5}" --json $work/perf_ab.json
  grep -E "^ |^# " "$log/ab.log" | tee -a "$summary"
  if [ -n "${MTP_AB_KERNELS_FILTER:-}" ]; then
    step ab_build_kernels cmake --build build-gpu-base -j "$(nproc)" --target kernels_benchmark
    step ab_kernels $B perf ab build-gpu-base/kernels_benchmark $build/kernels_benchmark \
      --filter "$MTP_AB_KERNELS_FILTER" --rounds "${MTP_AB_ROUNDS:-5}" --json $work/perf_ab_kernels.json
    grep -E "^ |^# " "$log/ab_kernels.log" | tee -a "$summary"
  fi
fi
fi
if want anchor; then
step anchor_source $B run ci/megatron_recorder/source.toml --variant ref_p1 --device cuda \
  --out $R/anchor/source.h5
step anchor_check python3 ci/torch_anchor/anchor.py check $R/anchor/source.h5 --device cuda \
  --out $R/anchor/anchor.h5
step anchor_check_compare $B compare $R/anchor/source.h5 $R/anchor/anchor.h5 --steps 1 \
  --records loss,grad --class rel_l2:1e-5
grep -E "^EQUAL|^DIFFERENT|^verdict" "$log/anchor_check_compare.log" | sed "s/^/  anchor model vs harness: /" | tee -a "$summary"
step anchor_harness env TMPDIR=/tmp timeout 400 $build/train_step_benchmark \
  --benchmark_filter="${MTP_ANCHOR_FILTER:-BM_PipelineStep/(small|tiny)/(p1|p1graphs|p4v2|p4v2graphs)/bf16/flash/(reference|candidate)/harness/cuda|BM_PipelineStep/(small|tiny)/p1/bf16/flash/reference/torch/cuda|BM_TrainStep/small/(p1|p1graphs)/bf16/flash/reference/harness/cuda/record:(none|digest)/extra}" \
  --benchmark_repetitions=${MTP_BENCH_REPETITIONS:-5} --benchmark_display_aggregates_only=true \
  --benchmark_out=$out/anchor_harness.json --benchmark_out_format=json
grep -E "^BM_.*_median" "$log/anchor_harness.log" >> "$summary"
# The same job's non-deterministic counterparts (MTP_BENCH_DETERMINISTIC=0: LibTorch's
# deterministic algorithms off) of the P = 1 rows: the table's det ÷ non-det ratios.
step anchor_nondet env TMPDIR=/tmp MTP_BENCH_DETERMINISTIC=0 timeout 200 $build/train_step_benchmark \
  --benchmark_filter="${MTP_NONDET_FILTER:-BM_PipelineStep/(small|tiny)/(p1|p1graphs)/bf16/flash/reference/(harness|torch)/cuda}" \
  --benchmark_repetitions=${MTP_BENCH_REPETITIONS:-5} --benchmark_display_aggregates_only=true \
  --benchmark_out=$out/anchor_nondet.json --benchmark_out_format=json
grep -E "^BM_.*_median" "$log/anchor_nondet.log" | sed 's/^/(non-deterministic) /' >> "$summary"
for c in ${MTP_ANCHOR_CASES:-small:eager small:compile tiny:eager tiny:compile}; do
  size=${c%%:*}; mode=${c#*:}
  step "anchor_${size}_${mode}" timeout 400 python3 ci/torch_anchor/anchor.py time --size $size \
    --mode $mode --json $out/anchor_${size}_${mode}.json
  grep -E "^BM_TorchAnchor|Error|error" "$log/anchor_${size}_${mode}.log" | tail -3 | tee -a "$summary"
done
step anchor_table python3 ci/torch_anchor/anchor.py table $out/anchor_harness.json \
  $out/anchor_*_*.json --nondeterministic $out/anchor_nondet.json \
  --markdown $out/anchor_table.md
cat "$log/anchor_table.log" >> "$summary"
fi
if want megatron; then
meg=${MTP_MEGATRON_TREE:-build-megatron/Megatron-LM}
src=${MTP_MEGATRON_SOURCE:-$work/megatron_source.h5}
[ -n "${MTP_MEGATRON_SOURCE:-}" ] ||
  step megatron_source $B run ci/megatron_recorder/source.toml --variant ref_p1 --device cpu --out "$src"
say "megatron: Megatron-LM $(cat "$meg/REVISION" 2>/dev/null || echo '(no REVISION)'), source $src"
for init in harness megatron; do
  rec=$out/megatron_train_${init}_init.h5
  step megatron_record_$init env PYTHONPATH="$meg" NCCL_ALGO=Ring NCCL_NVLS_ENABLE=0 \
    python3 ci/megatron_recorder/record.py "$src" --init $init --steps 3 --out "$rec"
  grep -E "^(step|record)" "$log/megatron_record_$init.log" | sed "s/^/  $init init: /" | tee -a "$summary"
  for dev in cuda cpu; do
    step megatron_replay_${init}_$dev $B replay "$rec" --device $dev --class rel_l2:1e-5
    grep -E "^(EQUAL|DIFFERENT|verdict)" "$log/megatron_replay_${init}_$dev.log" | sed "s/^/  replay on $dev: /" | tee -a "$summary"
  done
done
step megatron_vs_harness $B compare "$src" "$out/megatron_train_harness_init.h5" --class rel_l2:1e-5
grep -E "^(EQUAL|DIFFERENT|verdict)" "$log/megatron_vs_harness.log" | sed "s/^/  harness vs Megatron: /" | tee -a "$summary"
fi
if want records; then
gpu_ctx="gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1),driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
# Issue 9: the record writer's and the digest's throughput on this machine's disk, and compare
# against h5diff on two identical 1.5 GB records.
step bench_record env TMPDIR=/tmp timeout 240 $build/record_benchmark \
  --benchmark_out=$work/record_benchmark.json --benchmark_out_format=json
grep -E "^BM_" "$log/bench_record.log" >> "$summary"
df -h /tmp | tail -1 | sed 's/^/disk of \/tmp: /' >> "$summary"
# The same writer on tmpfs (memory), and the disk's own sequential write with fsync: which of
# the two limits the full-record rate.
step bench_record_shm env TMPDIR=/dev/shm timeout 240 $build/record_benchmark \
  --benchmark_filter=BM_RecordWrite --benchmark_out=$work/record_benchmark_shm.json \
  --benchmark_out_format=json
grep -E "^BM_" "$log/bench_record_shm.log" | sed 's/^/(\/dev\/shm) /' >> "$summary"
df -h /dev/shm | tail -1 | sed 's/^/\/dev\/shm: /' >> "$summary"
step disk_dd dd if=/dev/zero of=/tmp/mtp-dd.bin bs=16M count=96 conv=fsync
tail -1 "$log/disk_dd.log" | sed 's/^/dd 1.6 GB to \/tmp with fsync: /' >> "$summary"
rm -f /tmp/mtp-dd.bin
if [ -z "${MTP_SKIP_COMPARE_BENCH:-}" ]; then
step bench_compare env TMPDIR=/tmp timeout 240 $build/compare_benchmark --benchmark_min_time=1 \
  --benchmark_out=$work/compare_benchmark.json --benchmark_out_format=json
grep -E "^BM_" "$log/bench_compare.log" >> "$summary"
fi
# Whole steps of the small model in bf16 at P = 1 with no record, digest records and full
# records (issue 9: digest ≤ 1.2× none), one repetition each (two runs of 1 and 4 steps).
step bench_train_step_record env TMPDIR=/tmp timeout 300 $build/train_step_benchmark \
  --benchmark_filter="BM_TrainStep/small/p1/bf16/flash/reference/harness/cuda/${MTP_RECORD_ROWS:-record}" \
  --benchmark_context="$gpu_ctx" --benchmark_out=$work/train_step_record.json \
  --benchmark_out_format=json
grep -E "^BM_" "$log/bench_train_step_record.log" >> "$summary"
fi
[ -f $R/default_a/ref_p4v2.h5 ] && $B info $R/default_a/ref_p4v2.h5 2>&1 | grep -E "^(gpu_|cuda_|cublas|nccl|torch_version|device|deterministic|CUBLAS|NCCL)" > "$log/fingerprint.log"
[ -f $R/p2_nccl/ref_p2v2.h5 ] && $B info $R/p2_nccl/ref_p2v2.h5 2>&1 | grep -E "^(execution|nccl_version|gpu_name)" >> "$log/fingerprint.log"
cat "$log/fingerprint.log" >> "$summary"
cp "$log"/*.json "$work"/*.json "$out"/ 2>/dev/null
tar -C "$work" -czf "$out/results.tar.gz" logs $(cd "$work" && ls *.json 2>/dev/null)
say "# done; logs in results.tar.gz"
