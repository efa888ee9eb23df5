#!/usr/bin/env bash
# Configures and builds mtp-harness into build/ (Ninja, RelWithDebInfo, all cores).
# Usage: ci/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build build -j "$(nproc)"
