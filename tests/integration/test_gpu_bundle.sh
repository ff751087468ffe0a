#!/usr/bin/env bash
# scripts/gpu_bundle.sh makes the folder for an air-gapped GPU node here, within 60 MiB, with a
# MANIFEST that matches its files and a CIFAR-10 subset the reader takes; scripts/gpu_check.sh
# unpacks its packages into a clean prefix and configures the build against that prefix (configure
# only: no GPU here), and --dry-run lists the steps without running or creating anything.
# Needs the Debian archive (apt-get download) and CIFAR-10; skipped, with the reason, without them.
source "$(dirname "$0")/lib.sh"
[ -f "$CIFAR/data_batch_5.bin" ] || skip "CIFAR-10 binaries not found in $CIFAR"
command -v apt-get > /dev/null || skip "no apt-get (not a Debian machine)"
mkdir -p "$WORK/probe" && chmod 777 "$WORK" "$WORK/probe"
(cd "$WORK/probe" && apt-get download -qq pkgconf > /dev/null 2>&1) ||
  skip "apt-get download cannot reach the Debian archive (no network)"

# --- the bundle ---
bash "$SRC/scripts/gpu_bundle.sh" --out "$WORK/bundle" --cifar "$CIFAR" > "$WORK/bundle.log" 2>&1 ||
  { cat "$WORK/bundle.log"; fail "gpu_bundle.sh failed"; }
tail -1 "$WORK/bundle.log"
bytes=$(du -sb "$WORK/bundle" | cut -f1)
[ "$bytes" -le $((60 * 1048576)) ] || fail "bundle is $bytes bytes, over 60 MiB"
debs=$(find "$WORK/bundle/debs" -name '*.deb' | wc -l)
[ "$debs" -ge 50 ] || fail "only $debs packages in the bundle"
for p in cmake libopenmpi-dev libhdf5-dev libdnnl-dev libgtest-dev libtomlplusplus-dev; do
  ls "$WORK/bundle/debs/${p}_"*.deb > /dev/null 2>&1 || fail "package $p missing from the bundle"
done
ls "$WORK/bundle/debs/"libc6_*.deb > /dev/null 2>&1 && fail "the bundle carries glibc, which every node has"
# The MANIFEST names every file with its size and sum.
(cd "$WORK/bundle" && grep -v '^#\|^cifar10-subset:' MANIFEST | awk '{ print $1 "  " $3 }' | sha256sum -c --quiet) ||
  fail "MANIFEST does not match the files"
[ "$(grep -vc '^#\|^cifar10-subset:' "$WORK/bundle/MANIFEST")" = "$(find "$WORK/bundle" -type f ! -name MANIFEST | wc -l)" ] ||
  fail "MANIFEST does not list every file"
mkdir -p "$WORK/subset"
tar -C "$WORK/subset" -xJf "$WORK/bundle/cifar10-subset.tar.xz"
for i in 1 2 3 4 5; do
  [ "$(stat -c %s "$WORK/subset/cifar-10-batches-bin/data_batch_$i.bin")" = $((200 * 3073)) ] ||
    fail "data_batch_$i.bin of the subset is not 200 records"
  cmp -n $((200 * 3073)) "$WORK/subset/cifar-10-batches-bin/data_batch_$i.bin" "$CIFAR/data_batch_$i.bin" ||
    fail "data_batch_$i.bin of the subset is not the start of the original"
done
[ "$(stat -c %s "$WORK/subset/cifar-10-batches-bin/test_batch.bin")" = $((500 * 3073)) ] ||
  fail "test_batch.bin of the subset is not 500 records"
# ddp_train reads the subset: doctor's dataset check reads both sets with the CIFAR-10 reader.
"$BIN" doctor --config "$SRC/configs/cifar.toml" --data.root "$WORK/subset/cifar-10-batches-bin" \
  --no-sweep > "$WORK/doctor.log" 2>&1 || { cat "$WORK/doctor.log"; fail "doctor on the subset failed"; }
grep -q "1000 train + 500 test samples" "$WORK/doctor.log" ||
  { cat "$WORK/doctor.log"; fail "doctor did not read 1000 training and 500 test images"; }

# --- the dry run with that bundle: every step named, in order; nothing run or created ---
bash "$SRC/scripts/gpu_check.sh" --dry-run --bundle "$WORK/bundle" --work "$WORK/dry" > "$WORK/dry.log" 2>&1 ||
  { cat "$WORK/dry.log"; fail "gpu_check.sh --dry-run failed"; }
cat "$WORK/dry.log"
steps=$(awk 'NR > 1 { print $1 }' "$WORK/dry.log" | tr '\n' ' ')
want="unpack_bundle configure build unit_gpu unit_nccl_per_gpu integration_cuda cifar_gpu_vs_cpu mobilenet_gpu_vs_cpu sanitizer_memcheck sanitizer_racecheck sanitizer_synccheck fp16_loss_scaling gpu_bench lenet_cifar10_10_epochs gpu_compare "
[ "$steps" = "$want" ] || fail "dry-run steps: '$steps', expected '$want'"
grep -q "resnet20\|ResNet-20" "$WORK/dry.log" || fail "dry run does not mention ResNet-20"
grep -q "fp32 and bf16" "$WORK/dry.log" || fail "dry run does not mention both precisions"
grep -q "gpu_compare.sh.*torch.compile" "$WORK/dry.log" || fail "dry run does not say what gpu_compare runs"
[ ! -e "$WORK/dry" ] || fail "--dry-run created its work tree"

# --- unpack and configure in a clean prefix (needs nvcc: gpu_check builds the CUDA backend) ---
[ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc > /dev/null ||
  skip "no CUDA toolkit here: the bundle was made and checked, the configure step needs nvcc"
bash "$SRC/scripts/gpu_check.sh" --configure-only --bundle "$WORK/bundle" --work "$WORK/check" \
  > "$WORK/check.log" 2>&1 || { cat "$WORK/check.log" "$WORK/check/logs/configure.log"; fail "unpack + configure failed"; }
cat "$WORK/check.log"
cache="$WORK/check/build/CMakeCache.txt"
p="$WORK/check/prefix/usr"
in_prefix() {  # in_prefix KEY: the cache value of KEY lies in the prefix
  grep -q "^$1:[A-Z]*=$p/" "$cache" || fail "$1 is not taken from the prefix: $(grep "^$1:" "$cache")"
}
for key in CMAKE_COMMAND dnnl_DIR tomlplusplus_DIR nlohmann_json_DIR GTest_DIR MPI_C_COMPILER \
  HDF5_C_COMPILER_EXECUTABLE ZLIB_LIBRARY_RELEASE PKG_CONFIG_EXECUTABLE; do
  in_prefix "$key"
done
grep -q "^MPI_C_HEADER_DIR:[A-Z]*=$p/" "$cache" || grep -q "^MPI_mpi_LIBRARY:[A-Z]*=$p/" "$cache" ||
  fail "MPI is not the prefix's: $(grep '^MPI_\(C_HEADER_DIR\|mpi_LIBRARY\)' "$cache")"
grep -q "^HDF5_C_LIBRARY_hdf5:[A-Z]*=$p/" "$cache" ||
  fail "HDF5 is not the prefix's: $(grep "^HDF5_C_LIBRARY_hdf5" "$cache")"
grep -q "ddp_train: CUDA backend ON" "$WORK/check/logs/configure.log" || fail "configured without the CUDA backend"
pass "bundle $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB ($debs packages, CIFAR-10 subset); unpacked and configured against its prefix; dry run lists the steps"
