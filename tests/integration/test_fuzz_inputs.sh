#!/usr/bin/env bash
# Fuzz: mutated input files through a short training run: the TOML configuration (lines dropped,
# duplicated or cut, characters replaced or inserted), IDX data (Fashion-MNIST subsets, raw and
# .gz: bit flips, changed bytes, the magic and sizes in the first 16 bytes, truncation, extension)
# and CIFAR-10 binary data (a tiny generated set: the same, plus out-of-range labels). Each must
# train, or fail with an error naming the file or key; never die of a signal or hang. (Packed
# HDF5 data files join this test when that format exists.) See lib_fuzz.sh for the seed and scale.
source "$(dirname "$0")/lib.sh"
# python3 on PATH may be a pyenv shim that takes ~1 s a start before it falls back to Debian's;
# lib_fuzz.sh's mutator and the data below use Debian's directly where it is.
[ -x /usr/bin/python3 ] && python3() { /usr/bin/python3 "$@"; }
source "$(dirname "$0")/lib_fuzz.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"

# Small runs: whatever a mutated file says, the command line keeps the run short. The limits are
# under the subsets' 256 and 128 samples, so the IDX cases go through the limited readers (which
# read only the kept samples).
short=(--data.train_limit 200 --data.test_limit 100 --train.batch_size 64 --train.epochs 1
       --runtime.threads 1)

# --- The data the cases mutate -----------------------------------------------------------------
# Subsets of Fashion-MNIST (256 training, 128 test images), raw and gzip-compressed, and a tiny
# generated set in the CIFAR-10 binary layout: 5 training files and a test file of 40 records each
# (a label byte, then 3x32x32 pixels).
fashion_subset "$WORK/idx_raw"
mkdir -p "$WORK/idx_gz" "$WORK/cifar"
python3 - "$WORK/cifar" << 'EOF'
import random, sys
rng = random.Random(7)
for name in [f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]:
    with open(f"{sys.argv[1]}/{name}", "wb") as f:
        for _ in range(40):
            f.write(bytes([rng.randrange(10)]) + bytes(rng.randrange(256) for _ in range(3072)))
EOF
for f in "$WORK"/idx_raw/*; do gzip -c "$f" > "$WORK/idx_gz/$(basename "$f").gz"; done
idx_files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte
           t10k-labels-idx1-ubyte)
idx_kinds=(head16 flip setbytes truncate extend head16)
idx_case() {  # idx_case I: sets form, name and kind of IDX case I
  form=$([ $(($1 % 2)) = 0 ] && echo raw || echo gz)
  name=${idx_files[$(($1 / 2 % 4))]}
  [ "$form" = gz ] && name="$name.gz"
  kind=${idx_kinds[$(($1 / 2 % ${#idx_kinds[@]}))]}
}

cifar_files=(data_batch_1.bin data_batch_3.bin data_batch_5.bin test_batch.bin)
cifar_kinds=(cifar_label flip truncate extend setbytes)

# Every mutated file first, in one Python start (lib_fuzz.sh); a data case's file is then copied
# into a fresh copy of its data set.
n_toml=$(scaled 16) n_idx=$(scaled 16) n_cifar=$(scaled 10)
for ((i = 0; i < n_toml; i++)); do
  plan_mutation "toml$i" text "$FASHION_CONFIG" "$WORK/fuzz_$i.toml"
done
for ((i = 0; i < n_idx; i++)); do
  idx_case "$i"
  plan_mutation "idx$i" "$kind" "$WORK/idx_$form/$name" "$WORK/idx_mut_$i"
done
for ((i = 0; i < n_cifar; i++)); do
  plan_mutation "cifar$i" "${cifar_kinds[$((i % ${#cifar_kinds[@]}))]}" \
    "$WORK/cifar/${cifar_files[$((i % 4))]}" "$WORK/cifar_mut_$i"
done
mutate_planned

# --- TOML --------------------------------------------------------------------------------------
for ((i = 0; i < n_toml; i++)); do
  f="$WORK/fuzz_$i.toml"
  what=${WHAT[toml$i]}
  # A failure names the file (parse errors: FILE:LINE:COL) or the key at fault.
  fuzz_case "TOML #$i: $what" "fuzz_$i\.toml|[a-z_]+\.[a-z_]+" 120 -- \
    "$BIN" --config "$f" "${short[@]}" --run-dir "$WORK/toml_run_$i"
  rm -rf "$WORK/toml_run_$i"
done

# --- IDX ---------------------------------------------------------------------------------------
for ((i = 0; i < n_idx; i++)); do
  idx_case "$i"
  dir="$WORK/idx_case"
  rm -rf "$dir" && cp -r "$WORK/idx_$form" "$dir"
  cp "$WORK/idx_mut_$i" "$dir/$name"
  what=${WHAT[idx$i]}
  fuzz_case "IDX #$i $name: $what" "$name" 120 -- \
    "$BIN" --config "$FASHION_CONFIG" --model.preset lenet_mnist \
    --data.root "$dir" "${short[@]}" --run-dir "$WORK/idx_run"
  rm -rf "$WORK/idx_run"
done

# --- CIFAR-10 binary ---------------------------------------------------------------------------
for ((i = 0; i < n_cifar; i++)); do
  name=${cifar_files[$((i % 4))]}
  kind=${cifar_kinds[$((i % ${#cifar_kinds[@]}))]}
  dir="$WORK/cifar_case"
  rm -rf "$dir" && cp -r "$WORK/cifar" "$dir"
  cp "$WORK/cifar_mut_$i" "$dir/$name"
  what=${WHAT[cifar$i]}
  fuzz_case "CIFAR #$i $name: $what" "$name" 120 -- \
    "$BIN" --config "$SRC/configs/cifar.toml" --data.root "$dir" --data.augment false \
    "${short[@]}" --data.train_limit 0 --data.test_limit 0 --train.batch_size 50 \
    --run-dir "$WORK/cifar_run"
  case "$kind" in
    cifar_label)
      [ "$FUZZ_LAST_RC" != 0 ] || fail "CIFAR #$i $name ($what): a damaged file was accepted" ;;
  esac
  rm -rf "$WORK/cifar_run"
done
pass "$FUZZ_CASES mutated TOML, IDX and CIFAR files: each trained or failed naming the file or key"
