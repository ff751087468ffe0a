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
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libdnnl-dev libgtest-dev zlib1g-dev
  libturbojpeg0-dev libpng-dev  # ddp_train pack and predict: JPEG and PNG decoding
  libleptonica-dev  # ... and BMP, PPM/PGM, TIFF, WebP (the rest of torchvision's ImageFolder)
  libprotobuf-dev protobuf-compiler libisal-dev  # run.tensorboard: event messages, CRC-32C
  libonnx-dev  # ddp_train export: ONNX graphs and their checker
  ocl-icd-opencl-dev opencl-c-headers  # Debian's oneDNN CMake package (OpenCL GPU runtime) needs them
  dataset-fashion-mnist
  slurm-wlm munge lmod tcl iproute2 util-linux
  xz-utils  # scripts/gpu_bundle.sh packs the CIFAR-10 subset with tar -J (test_gpu_bundle.sh)
  # test oracles: the PyTorch parity test, snapshot_to_torch.py, the torch benchmarks
  python3-torch python3-torchvision python3-h5py python3-pil python3-numpy libopenblas0
  python3-protobuf python3-crcmod  # the independent TensorBoard event-file reader
  chromium  # test_report.sh renders the report page headless (DOM and screenshot)
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
if ! command -v npm > /dev/null; then
  echo "setup: installing nodejs npm"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# Environment Modules conflicts with lmod as a Debian package: unpack it beside lmod (the tests use
# its modulecmd.tcl with tclsh; DDP_ENVMODULES_ROOT overrides the place).
envmod_root=${DDP_ENVMODULES_ROOT:-/opt/environment-modules}
if ! dpkg-query -W -f='${Status}' environment-modules 2>/dev/null | grep -q "install ok installed" &&
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
if ! cmake -S "$here" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DDDP_CUDA=AUTO ${CMAKE_ARGS:-} \
  > "$build_dir/configure.log" 2>&1; then
  cat "$build_dir/configure.log" >&2
  exit 1
fi
grep "ddp_train:" "$build_dir/configure.log" || true
cmake --build "$build_dir" -j "$(nproc)"
echo "setup: built $build_dir/ddp_train"
