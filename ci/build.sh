#!/usr/bin/env bash
# Configures and builds mtp-harness into build/ (Ninja, RelWithDebInfo, all cores).
# Usage: ci/build.sh [-DOPTION=VALUE...] [TARGET...]
#   no TARGET: everything (the tool, the tests, the benchmarks); `ci/build.sh mtp-harness`
#   builds only the tool (the README's first command). -D options go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
cfg=()
targets=()
for a in "$@"; do
  case $a in
    -D*) cfg+=("$a") ;;
    *) targets+=(--target "$a") ;;
  esac
done
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cfg[@]}"
cmake --build build -j "$(nproc)" "${targets[@]}"
