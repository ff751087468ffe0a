#!/usr/bin/env bash
# Installs the Debian 12 packages ddp_train needs (idempotent: only what is missing) and builds it.
#   scripts/setup.sh [BUILD_DIR]      (default: build)
# Environment:
#   DDP_SETUP_NO_BUILD=1   only install;
#   DDP_SETUP_PACKAGES     "all" (default: also what the tests use: Slurm, PyTorch, Chromium, Node.js)
#                          or "build" (what building and running ddp_train need);
#   DDP_SETUP_TARGETS      the targets to build (default: all of them); with a list, the CUDA plugin
#                          (ddp_cuda) is added when a GPU is visible (nvidia-smi -L), built for it
#                          alone (CUDAARCHS=native) in a build directory configured for the first time;
#   CMAKE_ARGS             extra configure flags.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-$here/build}
what=${DDP_SETUP_PACKAGES:-all}
case $what in all | build) ;; *) echo "setup: DDP_SETUP_PACKAGES='$what': expected all or build" >&2; exit 2 ;; esac

# What building and running ddp_train need (the quick start installs only these).
packages=(
  g++ make cmake pkg-config
  libopenmpi-dev openmpi-bin
  libhdf5-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libdnnl-dev libgtest-dev zlib1g-dev
  libturbojpeg0-dev libpng-dev  # ddp_train pack and predict: JPEG and PNG decoding
  libleptonica-dev  # ... and BMP, PPM/PGM, TIFF, WebP (the rest of torchvision's ImageFolder)
  libprotobuf-dev protobuf-compiler libisal-dev  # run.tensorboard: event messages, CRC-32C
  libonnx-dev  # ddp_train export: ONNX graphs and their checker
  ocl-icd-opencl-dev opencl-c-headers  # Debian's oneDNN CMake package (OpenCL GPU runtime) needs them
  dataset-fashion-mnist  # the quick start's data
)
# What the tests use besides (scripts/run_tests.sh): a Slurm cluster, oracles, a browser.
[ "$what" = all ] && packages+=(
  slurm-wlm munge lmod tcl iproute2 util-linux
  xz-utils  # scripts/gpu_bundle.sh packs the CIFAR-10 subset with tar -J (test_gpu_bundle.sh)
  # test oracles: the PyTorch parity test, snapshot_to_torch.py, the torch benchmarks
  python3-torch python3-torchvision python3-h5py python3-pil python3-numpy libopenblas0
  python3-protobuf python3-crcmod  # the independent TensorBoard event-file reader
  chromium  # test_report.sh renders the report page headless (DOM and screenshot)
  hdf5-tools  # the tests read snapshots back with h5dump / h5ls
)
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all packages present"
fi
# test_onnx_export.sh installs onnxruntime-node with npm. A Node.js from elsewhere (NodeSource)
# brings its own npm and conflicts with Debian's npm package: install Debian's only when none is.
if [ "$what" = all ] && ! command -v npm > /dev/null; then
  echo "setup: installing nodejs npm"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# Environment Modules conflicts with lmod as a Debian package: unpack it beside lmod (the tests use
# its modulecmd.tcl with tclsh; DDP_ENVMODULES_ROOT overrides the place).
envmod_root=${DDP_ENVMODULES_ROOT:-/opt/environment-modules}
if [ "$what" = all ] &&
  ! dpkg-query -W -f='${Status}' environment-modules 2>/dev/null | grep -q "install ok installed" &&
  [ -z "$(find "$envmod_root" -name modulecmd.tcl 2>/dev/null)" ]; then
  echo "setup: unpacking environment-modules into $envmod_root"
  tmp=$(mktemp -d) && chmod 755 "$tmp"
  (cd "$tmp" && { $sudo apt-get download -qq environment-modules 2>/dev/null ||
    { $sudo apt-get update -qq && $sudo apt-get download -qq environment-modules; }; } &&
    $sudo dpkg -x environment-modules_*.deb "$envmod_root")
  rm -rf "$tmp"
fi

[ "${DDP_SETUP_NO_BUILD:-0}" = 1 ] && exit 0
# The CUDA backend is built when the toolkit, cuDNN and NCCL are found (DDP_CUDA=AUTO; the CMake
# output says what is missing otherwise); CMAKE_ARGS=-DDDP_CUDA=ON insists, -DDDP_CUDA=OFF skips it.
# A binary with it runs on machines without a GPU (it trains on the CPU there).
mkdir -p "$build_dir"
targets=()
if [ -n "${DDP_SETUP_TARGETS:-}" ]; then
  read -r -a targets <<< "$DDP_SETUP_TARGETS"
  # The plugin only where it can run: a GPU is visible. Built for that GPU alone when this build
  # directory is new (a configured one keeps its architectures; CUDAARCHS set by you wins).
  if nvidia-smi -L > /dev/null 2>&1; then
    targets+=(ddp_cuda)
    [ -f "$build_dir/CMakeCache.txt" ] || export CUDAARCHS=${CUDAARCHS:-native}
  fi
fi
if ! cmake -S "$here" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DDDP_CUDA=AUTO ${CMAKE_ARGS:-} \
  > "$build_dir/configure.log" 2>&1; then
  cat "$build_dir/configure.log" >&2
  exit 1
fi
grep "ddp_train:" "$build_dir/configure.log" || true
if ((${#targets[@]})); then
  # ddp_cuda exists only where the CUDA backend is configured.
  if ! grep -q "ddp_train: CUDA backend ON" "$build_dir/configure.log"; then
    targets=("${targets[@]/ddp_cuda/}")
  fi
  echo "setup: building ${targets[*]} (the tests and benchmarks are built by scripts/run_tests.sh)"
  cmake --build "$build_dir" -j "$(nproc)" --target ${targets[@]}
else
  cmake --build "$build_dir" -j "$(nproc)"
fi
echo "setup: built $build_dir/ddp_train"
