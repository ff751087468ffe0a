#!/usr/bin/env bash
# Fuzz: mutated snapshots (bit flips and changed bytes in HDF5 metadata and data, truncation,
# extension, header removed, header removed and metadata corrupted, a damaged magic or header) through
# `inspect` (many: cheap), `eval`, `--resume FILE` and `--resume auto` (fewer: they train). Each must
# read, or fail with an error naming the file; never die of a signal or hang. The runs read a
# 256/128-image subset of Fashion-MNIST written once (not the whole .gz set each). See lib_fuzz.sh
# for the seed and the scale.
source "$(dirname "$0")/lib.sh"
# python3 on PATH may be a pyenv shim that takes ~1 s a start before it falls back to Debian's;
# lib_fuzz.sh's mutator and fashion_subset use Debian's directly where it is.
[ -x /usr/bin/python3 ] && python3() { /usr/bin/python3 "$@"; }
source "$(dirname "$0")/lib_fuzz.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"

# The images the runs use, as raw IDX files: every training or eval case read (and decompressed)
# the whole 60,000 + 10,000 images to keep 256 and 128; what a case checks is how the snapshot
# reads, whichever images train.
fashion_subset "$WORK/data"
common=(--config "$SRC/configs/fashion_mnist.toml" --model.preset lenet_mnist --data.root "$WORK/data"
        --data.train_limit 256 --data.test_limit 128 --train.batch_size 64 --runtime.threads 1)
"$BIN" "${common[@]}" --train.epochs 2 --train.save_every 1 --run-dir "$WORK/base" > "$WORK/base.log" \
  || { cat "$WORK/base.log"; fail "the base run failed"; }
base="$WORK/base/snapshot_e0002.h5"
[ -f "$base" ] || fail "no snapshot_e0002.h5 from the base run"
# Every other case: the header removed and HDF5's metadata corrupted, the case that crashed HDF5
# inside the reading process (about 1 in 15 of these crashed `inspect` before snapshot_read.cpp
# parsed header-less files in a child process).
kinds=(flip setbytes truncate extend noheader magic header)
# kind_of N sets kind (a variable, not output to capture: a $(...) per case cost a process start).
kind_of() { if (($1 % 2 == 0)); then kind=noheader_flip; else kind=${kinds[$(($1 / 2 % 7))]}; fi; }
# Damage that a snapshot's header always reveals must be an error, never a silent read.
must_fail() {
  case "$1" in
    truncate | extend | magic)
      [ "$FUZZ_LAST_RC" != 0 ] || fail "$2: a damaged snapshot was read without complaint" ;;
  esac
}

# Every mutated file first, in one Python start (lib_fuzz.sh); the --resume auto cases' files are
# copied into their run directories below.
n_inspect=$(scaled 70) n_eval=$(scaled 12) n_file=$(scaled 6) n_auto=$(scaled 6)
for ((i = 0; i < n_inspect; i++)); do kind_of "$i"; plan_mutation "inspect$i" "$kind" "$base" "$WORK/inspect_$i.h5"; done
for ((i = 0; i < n_eval; i++)); do kind_of "$((i * 3 + 1))"; plan_mutation "eval$i" "$kind" "$base" "$WORK/eval_$i.h5"; done
for ((i = 0; i < n_file; i++)); do kind_of "$((i * 5))"; plan_mutation "resume$i" "$kind" "$base" "$WORK/resume_$i.h5"; done
for ((i = 0; i < n_auto; i++)); do kind_of "$((i * 5 + 3))"; plan_mutation "auto$i" "$kind" "$base" "$WORK/auto_$i.h5"; done
mutate_planned

for ((i = 0; i < n_inspect; i++)); do
  kind_of "$i"
  f="$WORK/inspect_$i.h5"
  what=${WHAT[inspect$i]}
  fuzz_case "inspect #$i: $what" "inspect_$i\.h5" 60 -- "$BIN" inspect "$f"
  must_fail "$kind" "inspect #$i: $what"
done

for ((i = 0; i < n_eval; i++)); do
  kind_of "$((i * 3 + 1))"
  f="$WORK/eval_$i.h5"
  what=${WHAT[eval$i]}
  fuzz_case "eval #$i: $what" "eval_$i\.h5" 120 -- "$BIN" eval --snapshot "$f" "${common[@]}"
  must_fail "$kind" "eval #$i: $what"
done

# --resume FILE: one more epoch from the mutated epoch-2 snapshot.
for ((i = 0; i < n_file; i++)); do
  kind_of "$((i * 5))"
  f="$WORK/resume_$i.h5"
  what=${WHAT[resume$i]}
  fuzz_case "--resume FILE #$i: $what" "resume_$i\.h5" 120 -- \
    "$BIN" "${common[@]}" --train.epochs 3 --run-dir "$WORK/rf_$i" --resume "$f"
  must_fail "$kind" "--resume FILE #$i: $what"
done

# --resume auto: the mutated snapshot is the newest in a copy of the run directory; it is used if
# it reads, else skipped with a warning naming it (the run resumes from epoch 1).
for ((i = 0; i < n_auto; i++)); do
  dir="$WORK/auto_$i"
  cp -r "$WORK/base" "$dir"
  cp "$WORK/auto_$i.h5" "$dir/snapshot_e0002.h5"
  what=${WHAT[auto$i]}
  fuzz_case "--resume auto #$i: $what" "snapshot_e0002\.h5" 120 -- \
    "$BIN" "${common[@]}" --train.epochs 3 --run-dir "$dir" --resume auto
  if grep -q "skipping unreadable" "$WORK/case.err"; then
    grep -q "snapshot_e0002.h5" "$WORK/case.err" || fail "auto #$i: a warning that names no file"
    grep -q "resume: .*snapshot_e0001.h5" "$WORK/case.out" \
      || { cat "$WORK/case.out"; fail "auto #$i ($what): skipped e0002 but did not resume from e0001"; }
  fi
  rm -rf "$dir"
done
pass "$FUZZ_CASES mutated snapshots: each read or failed with an error naming it"
