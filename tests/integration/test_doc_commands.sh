#!/usr/bin/env bash
# Every command of README.md and docs/*.md works as shown, or is exercised by a test the page names
# (docs/testing.md, "The documentation's commands are tested", has the rules):
#   bash tests/integration/test_doc_commands.sh build/ddp_train .
# doc_commands.py lists the commands and checks the tested-by markers (each named test exists and
# contains the command's distinctive part); this script runs the rest, each in a fresh scratch copy
# of a small repository (configs/, scripts/, slurm/ of this tree, the binary under test as
# build/ddp_train, ./ddp_train and ddp_train on PATH, data and fixtures), with small limits on
# training (DDP_DOC_OVERRIDES). DDP_DOC_ONLY=PATTERN runs only the commands matching it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"

# --- the commands, and the markers checked ---
python3 "$SRC/tests/integration/doc_commands.py" "$SRC" > "$WORK/plan.tsv" 2> "$WORK/plan.log" ||
  { cat "$WORK/plan.log"; fail "the documentation's commands or markers are not in order (above)"; }
handed=$(grep -c ': tested by ' "$WORK/plan.log" || true)
echo "$handed command(s) exercised by the tests their pages name:"
cat "$WORK/plan.log"

[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || [ -f "$FASHION/t10k-labels-idx1-ubyte" ] ||
  skip "Fashion-MNIST not installed at $FASHION_GZ (apt-get install dataset-fashion-mnist): the configs' commands need it"
find_python PIL  # the image fixtures (PY)
command -v mpirun > /dev/null || fail "no mpirun on PATH"
command -v h5ls > /dev/null || skip "no h5ls/h5dump (apt-get install hdf5-tools): docs/snapshot_format.md's commands need them"

# --- the stand-ins on PATH: the binary under test and mpirun, with the documented substitutions ---
TOOLS=$WORK/tools
mkdir -p "$TOOLS"
# One compute thread per rank: at these sizes a second costs more CPU-seconds than it saves.
export DDP_DOC_OVERRIDES=${DDP_DOC_OVERRIDES:---data.train_limit 128 --data.test_limit 128 --train.batch_size 16 --runtime.threads 1}
cat > "$TOOLS/ddp_train" << EOF
#!/usr/bin/env bash
# test_doc_commands.sh: the ddp_train under test. Training gets \$DDP_DOC_OVERRIDES (and one epoch
# unless the command sets --train.epochs); doctor a small bandwidth sweep.
args=("\$@")
case "\${1-}" in
  doctor) args+=(--sweep-max-mb 1) ;;
  layers|inspect|eval|predict|export|report|diff|pack) ;;
  *)
    train=1
    for a in "\$@"; do case \$a in --help|-h|--version) train=0 ;; esac; done
    if [ \$train = 1 ]; then
      read -r -a extra <<< "\$DDP_DOC_OVERRIDES"
      args+=("\${extra[@]}")
      case " \$* " in *" --train.epochs "*) ;; *) args+=(--train.epochs 1) ;; esac
    fi ;;
esac
exec "$BIN" "\${args[@]}"
EOF
real_mpirun=$(command -v mpirun)
cat > "$TOOLS/mpirun" << EOF
#!/usr/bin/env bash
# test_doc_commands.sh: the real mpirun with the opt-ins a root container needs (unless given) and
# all traffic on loopback, as mpirun_local in lib.sh runs it.
extra=(--mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x CUDA_VISIBLE_DEVICES)
case " \$* " in *" --oversubscribe "*) ;; *) extra+=(--oversubscribe) ;; esac
if [ "\$(id -u)" = 0 ]; then case " \$* " in *" --allow-run-as-root "*) ;; *) extra+=(--allow-run-as-root) ;; esac; fi
exec "$real_mpirun" "\${extra[@]}" "\$@"
EOF
chmod +x "$TOOLS/ddp_train" "$TOOLS/mpirun"
export PATH="$TOOLS:$PATH"

# --- data: CIFAR-10 at ../shared/data as the configs expect (the real copy, else generated) ---
mkdir -p "$WORK/shared/data"
if [ -f "$CIFAR/test_batch.bin" ]; then
  ln -s "$CIFAR" "$WORK/shared/data/cifar-10-batches-bin"
  echo "CIFAR-10: $CIFAR"
else
  mkdir -p "$WORK/shared/data/cifar-10-batches-bin"
  python3 - "$WORK/shared/data/cifar-10-batches-bin" << 'EOF'
import os, random, sys
out = sys.argv[1]
rng = random.Random(42)
names = ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]
for name in names:
    with open(os.path.join(out, name), "wb") as f:
        for _ in range(200):
            f.write(bytes([rng.randrange(10)]) + rng.randbytes(3072))
EOF
  echo "CIFAR-10: generated CIFAR-10-format files (no copy at $CIFAR)"
fi
CIFAR_DOC=$WORK/shared/data/cifar-10-batches-bin

# --- the scratch repository every command starts from ---
BASE=$WORK/base
mkdir -p "$BASE/build" "$BASE/scripts"
for d in configs slurm bench; do ln -s "$SRC/$d" "$BASE/$d"; done
for f in "$SRC"/scripts/*; do ln -s "$f" "$BASE/scripts/$(basename "$f")"; done
# scripts/setup.sh installs the packages and builds build/: scripts/run_tests.sh has done that before
# the suite runs, so the quick start's call of it only checks that the build is there.
rm "$BASE/scripts/setup.sh"
cat > "$BASE/scripts/setup.sh" << 'EOF'
#!/usr/bin/env bash
# test_doc_commands.sh: stands in for scripts/setup.sh (run by scripts/run_tests.sh before the tests).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -x "$here/build/ddp_train" ] || { echo "setup.sh stand-in: no $here/build/ddp_train" >&2; exit 1; }
EOF
chmod +x "$BASE/scripts/setup.sh"
cp "$TOOLS/ddp_train" "$BASE/build/ddp_train"
cp "$TOOLS/ddp_train" "$BASE/ddp_train"
# Image folders of two classes (photos/train, photos/test), two images directly in photos/, and
# cat.jpg: JPEG and PNG, sizes that vary.
"$PY" - "$BASE" << 'EOF'
import os, random, sys
from PIL import Image
base = sys.argv[1]
rng = random.Random(7)
def image(path, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    colour = {"cat": (200, 120, 40), "dog": (40, 90, 200)}.get(os.path.basename(os.path.dirname(path)),
                                                               (128, 128, 128))
    img = Image.new("RGB", size, colour)
    px = img.load()
    for _ in range(size[0] * size[1] // 4):
        px[rng.randrange(size[0]), rng.randrange(size[1])] = tuple(rng.randrange(256) for _ in range(3))
    img.save(path, quality=90) if path.endswith(".jpg") else img.save(path)
for split, n in (("train", 6), ("test", 3)):
    for cls in ("cat", "dog"):
        for i in range(n):
            ext = ".jpg" if i % 2 else ".png"
            image(f"{base}/photos/{split}/{cls}/{i}{ext}", (rng.randrange(48, 96), rng.randrange(48, 96)))
image(f"{base}/photos/a.png", (40, 50))
image(f"{base}/photos/b.jpg", (64, 64))
image(f"{base}/cat.jpg", (80, 60))
EOF
# The run the docs' runs/cifar/snapshot_eNNNN.h5 name: configs/cifar.toml, 50 one-step epochs, every
# snapshot kept.
FIXTURE=$WORK/fixture/repo
mkdir -p "$FIXTURE"
cp -a "$BASE/." "$FIXTURE/"
ln -s "$WORK/shared" "$WORK/fixture/shared"
(cd "$FIXTURE" && "$BIN" --config configs/cifar.toml --train.epochs 50 --train.save_every 1 \
  --train.keep_last 0 --data.train_limit 64 --data.test_limit 64 --train.batch_size 64 --runtime.threads 1 \
  > "$WORK/fixture.log" 2>&1) || { cat "$WORK/fixture.log"; fail "the fixture run runs/cifar failed"; }
[ -f "$FIXTURE/runs/cifar/snapshot_e0050.h5" ] || fail "the fixture run wrote no snapshot_e0050.h5"

# --- run the commands ---
# run_unit WHERE CIFAR_RUN COMMAND...: the commands in order, in a fresh scratch copy.
ran=0
failed=()
run_unit() {
  local where=$1 cifar_run=$2 dir cmd log t0 rc i=0
  shift 2
  if [ -n "${DDP_DOC_ONLY:-}" ] && ! printf '%s\n' "$@" | grep -q -- "$DDP_DOC_ONLY"; then return 0; fi
  dir=$(mktemp -d "$WORK/unit.XXXXXX")
  ln -s "$WORK/shared" "$dir/shared"
  cp -a "$BASE" "$dir/repo"
  if [ "$cifar_run" = 1 ]; then
    mkdir -p "$dir/repo/runs/cifar"
    ln -s "$FIXTURE"/runs/cifar/* "$dir/repo/runs/cifar/"
  fi
  for cmd in "$@"; do
    i=$((i + 1))
    cmd=${cmd//\/path\/to\/cifar-10-batches-bin/$CIFAR_DOC}
    log=$dir/cmd$i.log
    t0=$(date +%s%N)
    if (cd "$dir/repo" && timeout 300 bash -o pipefail -c "$cmd") > "$log" 2>&1 < /dev/null; then
      printf '  ok   %-28s %4d ms  %s\n' "$where" $((($(date +%s%N) - t0) / 1000000)) "$cmd"
      ran=$((ran + 1))
    else
      rc=$?
      printf '  FAIL %-28s exit %s: %s\n' "$where" "$rc" "$cmd"
      tail -n 30 "$log" | sed 's/^/       | /'
      failed+=("$where: $cmd (exit $rc)")
      break  # the rest of a sequence builds on this one
    fi
  done
  rm -rf "$dir"
}
unit=()
while IFS=$'\t' read -r kind a b; do
  if [ "$kind" = UNIT ]; then
    [ ${#unit[@]} -gt 0 ] && run_unit "${unit[@]}"
    unit=("$a" "$b")
  else
    unit+=("$a")
  fi
done < "$WORK/plan.tsv"
[ ${#unit[@]} -gt 0 ] && run_unit "${unit[@]}"

if [ ${#failed[@]} -gt 0 ]; then
  printf '  %s\n' "${failed[@]}"
  fail "${#failed[@]} documented command(s) do not work as shown"
fi
[ "$ran" -gt 0 ] || fail "no documented command ran${DDP_DOC_ONLY:+ (DDP_DOC_ONLY=$DDP_DOC_ONLY)}"
pass "$ran documented command(s) ran as shown; $handed more exercised by the tests their pages name"
