#!/usr/bin/env bash
# Builds the kernels/ targets and runs all their tests on the GPU machine (see
# ../shared/device/README.md): CPU tests, the CUDA kernels against the CPU kernels, and the
# LibTorch ops on CUDA tensors against CPU tensors. Logs go to OUT_DIR.
# Usage: kernels/run_gpu_tests.sh OUT_DIR [SOURCE_DIR]
#   SOURCE_DIR  the CMake source tree (default: this checkout's root)
#   BUILD_DIR   build directory (default: /tmp/mtp-kernels-build)
#   DEBS_DIR    Debian packages fetched by ../shared/device/fetch-debs.sh (default:
#               SOURCE_DIR/.device-debs), unpacked into /tmp/pfx
set -euo pipefail
out=${1:?usage: kernels/run_gpu_tests.sh OUT_DIR [SOURCE_DIR]}
src=${2:-$(cd "$(dirname "$0")/.." && pwd)}
build=${BUILD_DIR:-/tmp/mtp-kernels-build}
debs=${DEBS_DIR:-$src/.device-debs}
mkdir -p "$out" /tmp/pfx
for f in "$debs"/*.deb; do dpkg -x "$f" /tmp/pfx; done
export LD_LIBRARY_PATH=/tmp/pfx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
{
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
  nvcc --version | tail -2
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
    -DCMAKE_PREFIX_PATH="$torch_prefix;/tmp/pfx/usr;/tmp/pfx/usr/share"
  cmake --build "$build" -j "$(nproc)" --target kernels_cpu_test kernels_cuda_test \
    kernels_ops_test kernels_ops_cuda_test
} 2>&1 | tee "$out/build.log"
status=0
for t in kernels_cpu_test kernels_cuda_test kernels_ops_test kernels_ops_cuda_test; do
  "$build/kernels/$t" 2>&1 | tee "$out/$t.log" || status=1
done
grep -H -E "^\[ +(PASSED|FAILED|SKIPPED) +\]|tests? from .* ran" "$out"/kernels_*.log \
  | tee "$out/summary.log"
exit $status
