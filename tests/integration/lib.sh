# Shared helpers for the integration tests. Each test is run by CTest as
#   bash tests/integration/test_X.sh PATH/TO/ddp_train SOURCE_DIR
# and exits 0 (pass), 77 (skipped, with the reason printed) or anything else (fail).
set -euo pipefail
BIN=$(realpath "$1")
SRC=$(realpath "$2")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddp_it.XXXXXX")
[ "${DDP_KEEP_WORK:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
# These tests check CPU semantics (bitwise equalities, MPI stall reports) with runtime.device left
# at "auto": hide any GPU so that a GPU host runs them as our GPU-less CI does. The GPU tests
# (test_cuda_training.sh) restore the caller's value from DDP_CALLER_CUDA_VISIBLE_DEVICES.
if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then export DDP_CALLER_CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"; fi
export CUDA_VISIBLE_DEVICES=""
# python3 is Debian's, which has the oracles (torch, torchvision, h5py, PIL): a version manager's
# shim ahead of it on PATH (pyenv's costs ~0.6 CPU-seconds per call, and its Python lacks them)
# would be asked first by every `python3` of the tests and of the scripts they run.
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
  mkdir -p "$WORK/.bin" && ln -s /usr/bin/python3 "$WORK/.bin/python3" && PATH="$WORK/.bin:$PATH"
fi
CIFAR="$SRC/../shared/data/cifar-10-batches-bin"

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
pass() { echo "PASS: $*"; exit 0; }

# Fashion-MNIST as Debian packages it (gzipped IDX files): FASHION_GZ. The tests that train on it
# read FASHION, the same four files inflated once per build directory, with FASHION_CONFIG
# (configs/fashion_mnist.toml with that root): inflating the 26 MB of training images cost every
# rank ~0.2 CPU-seconds at start, about half of a small run, hundreds of starts per CI run. The
# packaged .gz files stay under test where reading them is (test_fashion_mnist_accuracy,
# test_doctor, test_doc_commands, the Slurm tests, the IDX unit tests). Without the package both
# name it anyway, and the tests skip on FASHION_GZ's files.
FASHION_GZ=/usr/share/datasets/fashion-mnist
FASHION=$FASHION_GZ
FASHION_CONFIG=$SRC/configs/fashion_mnist.toml
inflate_fashion() {
  local names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte
               t10k-labels-idx1-ubyte) n key dir tmp
  for n in "${names[@]}"; do [ -f "$FASHION_GZ/$n.gz" ] || return 0; done
  # Named after the packaged files' sizes and times: an upgraded package gets a copy of its own.
  key=$(cd "$FASHION_GZ" && stat -c '%n %s %Y' "${names[@]/%/.gz}" | cksum | cut -d' ' -f1)
  dir="$(dirname "$BIN")/test-data/fashion-mnist-$key"
  if [ ! -d "$dir" ]; then
    mkdir -p "$(dirname "$dir")" 2> /dev/null && [ -w "$(dirname "$dir")" ] || dir="$WORK/fashion-mnist"
    # Made aside and renamed into place: tests starting together never see half a copy (the
    # rename fails for all but the first, whose copy the others then use).
    tmp=$(mktemp -d "$dir.XXXXXX") && chmod 755 "$tmp"
    for n in "${names[@]}"; do gzip -dc "$FASHION_GZ/$n.gz" > "$tmp/$n"; done
    mv -T "$tmp" "$dir" 2> /dev/null || rm -rf "$tmp"
  fi
  # The configuration is the source tree's, made for each test: an edit of it is seen at once.
  sed "s|^root = \"[^\"]*\"|root = \"$dir\"|" "$SRC/configs/fashion_mnist.toml" > "$WORK/fashion_mnist.toml"
  grep -qF "root = \"$dir\"" "$WORK/fashion_mnist.toml" || fail "configs/fashion_mnist.toml sets no data root"
  FASHION=$dir FASHION_CONFIG=$WORK/fashion_mnist.toml
}
inflate_fashion

# mpirun with the opt-ins a root container needs; all traffic stays on loopback.
mpirun_local() {
  local extra=(--oversubscribe --mca btl self,vader,tcp --mca btl_tcp_if_include lo
               --mca oob_tcp_if_include lo)
  [ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
  [ -n "${CUDA_VISIBLE_DEVICES+x}" ] && extra+=(-x CUDA_VISIBLE_DEVICES)
  mpirun "${extra[@]}" "$@"
}

# Value of a numeric field of the summary line of a metrics.jsonl file.
summary_field() {
  grep '"summary": true' "$1" | grep -o "\"$2\": [^,}]*" | head -1 | sed 's/^[^:]*: *//; s/"//g'
}

# metrics.jsonl without the wall-clock fields (for comparing runs); the per-rank array is all
# timing but for samples and shares.
metrics_without_timing() {
  sed -E 's/, "ranks": \[[^]]*\]//; s/, "(images_per_s|epoch_s|eval_s|total_s|comm_wait_s)": [^,}]*//g' "$1"
}

# awk-based float comparison: ge A B -> success when A >= B.
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# The per-epoch train_loss values of a metrics.jsonl, rounded to 5 significant digits.
losses_5sig() {
  grep -o '"train_loss": [-0-9.e]*' "$1" | awk '{ printf "%.5g\n", $2 }'
}

# Max relative weight difference of two snapshots (ddp_train diff).
max_rel_diff() { "$BIN" diff "$1" "$2" | awk '/^max relative difference/ { print $4 }'; }

# PIDs of the ddp_train ranks whose command line mentions $1 (not mpirun's).
rank_pids() { pgrep -f "^$BIN .*$1" || true; }

# PID of MPI rank $2 among those ranks (empty if it is not running).
rank_pid() {
  local pid
  for pid in $(rank_pids "$1"); do
    # (not `tr | grep -q`: under pipefail, grep's early match can kill tr with SIGPIPE)
    grep -qx "OMPI_COMM_WORLD_RANK=$2" < <({ tr '\0' '\n' < "/proc/$pid/environ"; } 2> /dev/null) \
      && { echo "$pid"; return 0; }
  done
  return 0
}

# Waits until file $1 exists (up to $2 seconds); snapshots appear by rename, so it is complete.
wait_for_file() {
  local i
  for ((i = 0; i < $2 * 50; i++)); do [ -e "$1" ] && return 0; sleep 0.02; done
  return 1
}

# Waits until file $1 contains pattern $2 (up to $3 seconds).
wait_for() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
# seen_now FILE REGEX: returns as soon as a line of FILE matches (tail -F wakes on every write;
# wait_for's 0.1 s polls span many of a small model's steps), 1 after 300 s. With kill -STOP right
# after it, a test holds the ranks where they are before it kills one.
seen_now() {
  local rc=0 i
  # tail -F follows a file that does not exist yet by polling once a second (inotify needs it, or
  # its directory, to exist): the file is waited for first, in 10 ms steps.
  for ((i = 0; i < 30000; i++)); do [ -e "$1" ] && break; sleep 0.01; done
  coproc TAILF { exec tail -F -n +1 "$1" 2> /dev/null; }
  local pid=$TAILF_PID
  timeout 300 grep -m1 -q -- "$2" <&"${TAILF[0]}" || rc=1
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  return $rc
}

# stand_in_driver: a stand-in NVIDIA driver, the toolkit's stub libcuda.so as libcuda.so.1 (it
# loads, and finds no GPU), for the plugin tests. Without a driver, runtime.device = auto and cuda
# decide without loading the plugin at all; with one, as on a GPU node, the plugin is loaded and
# what became of it is reported. Defines with_driver CMD... (runs CMD with it on the library path)
# and sets real_driver (non-zero on a machine with a driver of its own, where "no driver" cannot be
# checked); skips the test without a stub.
stand_in_driver() {
  local stub
  stub=$(ls /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/lib/stubs/libcuda.so \
         /usr/local/cuda/targets/*/lib/stubs/libcuda.so 2> /dev/null | head -1 || true)
  [ -n "$stub" ] || skip "no stub libcuda.so in /usr/local/cuda (the CUDA toolkit's stubs)"
  mkdir -p "$WORK/driver" && cp "$stub" "$WORK/driver/libcuda.so.1"
  real_driver=$(ldconfig -p | grep -c 'libcuda\.so\.1 ' || true)
}
with_driver() { LD_LIBRARY_PATH="$WORK/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
