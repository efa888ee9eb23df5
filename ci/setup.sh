#!/usr/bin/env bash
# Installs the Debian 12 packages mtp-harness needs to build and test (idempotent: apt-get runs
# only when a package is missing).
# Usage: ci/setup.sh [tool]
#   tool: only what building and running the tool needs (the README's first command), not the
#   test-only packages (chromium, clang 14 for the sanitizer job), which are most of the download.
set -euo pipefail
pkgs=(build-essential cmake ninja-build git pkg-config
      libtorch-dev libhdf5-dev hdf5-tools libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
      libfmt-dev libxxhash-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev
      libpugixml-dev   # JUnit XML (harness/report)
      libopenblas0-pthread)  # the CPU BLAS: LibTorch's libblas.so.3, pinned (harness/common/environment.h)
if [ "${1:-}" != "tool" ]; then
  pkgs+=(chromium         # renders the HTML report to PNG in harness/report's test
         clang-14 libclang-rt-14-dev llvm-14  # ci/sanitize.sh: ASan/UBSan/libFuzzer, symbolizer
         clang-format-14   # ci/format.sh (run by ci/test.sh): the C++ style of .clang-format
         python3-torch python3-h5py)  # ci/torch_anchor's CTest anchor.torch_model
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "ci/setup.sh: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "ci/setup.sh: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
