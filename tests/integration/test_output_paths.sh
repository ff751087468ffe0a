#!/usr/bin/env bash
# Every output path of the subcommands (export --output, predict --output, report --output, eval
# --dump-logits) is written as `cat > PATH` would be, never replaced when it is not a regular file
# (issue 33, item 14; the previous version renamed a temporary file over a device node, which as
# root replaces /dev/null):
#  - a character device (mknod N c 1 3, /dev/null's numbers) stays that device;
#  - a FIFO stays a FIFO, and its reader gets the bytes;
#  - a directory is refused, naming it, and stays as it was;
#  - a regular file is replaced atomically and keeps its permissions;
#  - a symbolic link to a regular file stays a link (its target gets the content).
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION_GZ"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL
run="$WORK/run"
"$BIN" --config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 256 \
  --data.test_limit 64 --train.epochs 1 --runtime.threads 1 --run-dir "$run" > "$WORK/train.log" 2>&1 \
  || { cat "$WORK/train.log"; fail "training failed"; }
snap="$run/snapshot_e0001.h5"
mkdir -p "$WORK/img"
"$PY" -c "from PIL import Image; Image.new('L', (28, 28), 128).save('$WORK/img/a.png')"

# write_cmd NAME OUTPUT: the command NAME writing its output to OUTPUT.
write_cmd() {
  case $1 in
    export) "$BIN" export --snapshot "$snap" --output "$2" ;;
    predict) "$BIN" predict --snapshot "$snap" "$WORK/img/a.png" --output "$2" ;;
    report) "$BIN" report "$run" --images 4 --output "$2" ;;
    eval) "$BIN" eval --snapshot "$snap" --runtime.threads 1 --output-dir "$WORK/evalout" --dump-logits "$2" ;;
  esac
}

can_mknod=1
mknod "$WORK/probe" c 1 3 2> /dev/null || can_mknod=0
failed=()
for cmd in export predict report eval; do
  d="$WORK/$cmd"
  mkdir -p "$d"
  if [ $can_mknod = 1 ]; then
    mknod "$d/null" c 1 3
    if ! write_cmd $cmd "$d/null" > "$d/null.log" 2>&1; then cat "$d/null.log"; failed+=("$cmd: writing into a device failed"); fi
    [ -c "$d/null" ] || failed+=("$cmd: the character device was replaced by $(stat -c %F "$d/null")")
  fi
  mkfifo "$d/fifo"
  timeout 150 cat "$d/fifo" > "$d/from_fifo" &  # (bounded: a replaced FIFO never gets a writer)
  reader=$!
  if ! timeout 120 bash -c "$(declare -f write_cmd); BIN='$BIN' snap='$snap' run='$run' WORK='$WORK' write_cmd $cmd '$d/fifo'" \
    > "$d/fifo.log" 2>&1; then
    cat "$d/fifo.log"; failed+=("$cmd: writing into a FIFO failed")
    kill $reader 2> /dev/null || true
  fi
  for _ in $(seq 100); do kill -0 $reader 2> /dev/null || break; sleep 0.1; done
  kill $reader 2> /dev/null || true  # still waiting: nothing was ever written into the FIFO
  wait $reader 2> /dev/null || true
  [ -p "$d/fifo" ] || failed+=("$cmd: the FIFO was replaced by $(stat -c %F "$d/fifo")")
  [ -s "$d/from_fifo" ] || failed+=("$cmd: the FIFO's reader got nothing")
  mkdir -p "$d/dir/keep"
  if write_cmd $cmd "$d/dir" > "$d/dir.log" 2>&1; then failed+=("$cmd: a directory as the output was accepted"); fi
  grep -q "cannot write '$d/dir': it is a directory" "$d/dir.log" || { cat "$d/dir.log"; failed+=("$cmd: no clear error for a directory"); }
  [ -d "$d/dir/keep" ] || failed+=("$cmd: the directory was changed")
  echo old > "$d/file"
  chmod 640 "$d/file"
  write_cmd $cmd "$d/file" > "$d/file.log" 2>&1 || { cat "$d/file.log"; failed+=("$cmd: writing a regular file failed"); }
  [ "$(stat -c %a "$d/file")" = 640 ] || failed+=("$cmd: the file's mode changed to $(stat -c %a "$d/file")")
  ! cmp -s "$d/file" <(echo old) || failed+=("$cmd: the file was not written")
  echo old > "$d/target"
  ln -s target "$d/link"
  write_cmd $cmd "$d/link" > "$d/link.log" 2>&1 || { cat "$d/link.log"; failed+=("$cmd: writing through a link failed"); }
  [ -L "$d/link" ] || failed+=("$cmd: the symbolic link was replaced")
  ! cmp -s "$d/target" <(echo old) || failed+=("$cmd: the link's target was not written")
  ls "$d"/.*.tmp.* > /dev/null 2>&1 && failed+=("$cmd: a temporary file was left behind")
  echo "  $cmd: checked"
done
if [ ${#failed[@]} -gt 0 ]; then
  printf '  %s\n' "${failed[@]}" >&2
  fail "${#failed[@]} problem(s) with output paths"
fi
pass "export/predict/report/eval outputs: devices and FIFOs written into, directories refused, files replaced keeping their mode, links kept"
