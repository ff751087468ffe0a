#!/usr/bin/env bash
# Installs the Debian 12 packages ddp_train needs (idempotent: only what is missing) and builds it.
#   scripts/setup.sh [BUILD_DIR]      (default: build)
# Environment: DDP_SETUP_NO_BUILD=1 to only install; CMAKE_ARGS for extra configure flags.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-$here/build}

packages=(
  g++ make cmake pkg-config
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools
  libcli11-dev libtomlplusplus-dev libdnnl-dev libgtest-dev zlib1g-dev
  dataset-fashion-mnist
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all packages present"
fi

[ "${DDP_SETUP_NO_BUILD:-0}" = 1 ] && exit 0
cmake -S "$here" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "setup: built $build_dir/ddp_train"
