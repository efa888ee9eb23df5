#!/usr/bin/env bash
# Runs every test (GoogleTest suites and the scenario checks) through CTest.
# Usage: ci/test.sh [extra ctest options]
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900 "$@"
