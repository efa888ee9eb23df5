#!/usr/bin/env bash
# Checks that every C++ and CUDA source file of the repository is formatted as .clang-format says
# (clang-format 14, Debian's clang-format-14 / the machine's clang-format). Exit 0: all formatted;
# 1: the files that are not, each with `clang-format -i FILE` to fix it; 2: no clang-format.
# Usage: ci/format.sh [--fix]    (--fix formats them in place instead)
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then
  echo "ci/format.sh: clang-format not found (apt-get install clang-format-14)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "ci/format.sh: ${#bad[@]} of ${#files[@]} files are not formatted as .clang-format says:" >&2
  for f in "${bad[@]}"; do echo "  clang-format -i $f" >&2; done
  echo "(or ci/format.sh --fix)" >&2
  exit 1
fi
echo "ci/format.sh: ${#files[@]} files formatted as .clang-format says"
