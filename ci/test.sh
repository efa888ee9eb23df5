#!/usr/bin/env bash
# Checks the formatting (ci/format.sh), then runs every test (GoogleTest suites and the scenario
# checks) through CTest.
# Usage: ci/test.sh [extra ctest options]
set -euo pipefail
cd "$(dirname "$0")/.."
ci/format.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900 "$@"
