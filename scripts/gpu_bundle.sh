#!/usr/bin/env bash
# Prepares, on a machine with a Debian 12 package archive, what scripts/gpu_check.sh needs on a GPU
# node that has an NVIDIA driver and the CUDA toolkit (with cuDNN and NCCL) but no archive:
#
#   scripts/gpu_bundle.sh [--out DIR] [--cifar DIR] [--train-per-file N] [--test N]
#
#   DIR/debs/*.deb       the build's Debian packages and the libraries they load, less what any
#                        machine that can run nvcc has (the compiler, glibc, the base system);
#                        gpu_check.sh unpacks them into a private prefix (no root, no dpkg database)
#   DIR/cifar10-subset.tar.xz
#                        the first N records of each CIFAR-10 training file (default 200) and of
#                        the test file (default 500), in the binary format ddp_train reads: the
#                        whole set (~178 MB, barely compressible) does not fit the size limit
#   DIR/MANIFEST         what is in it, with sizes and SHA-256 sums
#
# DIR defaults to gpu_bundle/ in the source tree (git-ignored). The whole folder must stay within
# 60 MiB (the device tool carries at most 64 MiB with the source tree): the script fails, naming
# the sizes, when it does not. CIFAR-10 comes from ../shared/data/cifar-10-batches-bin beside the
# source tree unless --cifar says otherwise. Needs apt-get (download only: nothing is installed).
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$src/gpu_bundle"
cifar="$src/../shared/data/cifar-10-batches-bin"
train_per_file=200
test_records=500
limit_mib=60
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --cifar) cifar=$2; shift 2 ;;
    --train-per-file) train_per_file=$2; shift 2 ;;
    --test) test_records=$2; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "gpu_bundle: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "gpu_bundle: $*" >&2; exit 1; }
command -v apt-get > /dev/null || die "apt-get not found: run this on a Debian 12 machine"
for f in data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
  [ -f "$cifar/$f.bin" ] || die "CIFAR-10 binary file $cifar/$f.bin not found (--cifar DIR)"
done

# What the build needs (scripts/setup.sh's build packages; not the test oracles or Slurm).
packages=(cmake pkgconf libopenmpi-dev openmpi-bin libhdf5-dev hdf5-helpers libcli11-dev
  libtomlplusplus-dev nlohmann-json3-dev libdnnl-dev libgtest-dev zlib1g-dev libturbojpeg0-dev
  libpng-dev ocl-icd-opencl-dev opencl-c-headers libprotobuf-dev protobuf-compiler libisal-dev
  libonnx-dev)
# Present wherever nvcc runs (its host compiler, glibc and the base system), or never loaded by the
# build and its tests (ssh for remote launches, hwloc's X11 plugins, helper scripts).
base='^(gcc|g\+\+|cpp|gfortran|binutils|libbinutils|libctf|libgprofng|libc6|libc-dev-bin|libstdc\+\+|libgcc|linux-libc-dev|lib(a|t|l|ub|hwa)san[0-9]|libgomp|libquadmath|libitm|libatomic|libcc1|libisl|libmpfr|libmpc|libgmp|libcrypt|perl|libperl|m4$|autoconf|automake|autotools-dev|libgfortran|libjs-|libsepol|libselinux|libsemanage|libpam|libsystemd|libudev|libtinfo|libncurses|libzstd1|liblzma5|libbz2|zlib1g$|libdb5|libgdbm|libaudit|libcap|libacl|libattr|libpcre2-8|libmd0|libbsd0|debconf|dpkg|tar$|base-|libgpg-error|libgcrypt|liblz4|libxxhash|libseccomp|libext2fs|libcom-err|libss2|libuuid|libblkid|libmount|libsmartcols|util-linux|mount$|login$|passwd$|adduser|coreutils|bash$|sed$|grep$|gzip$|findutils|diffutils|hostname|init-system|ncurses|sensible-utils|libnsl|libtirpc|rpcsvc|libreadline|readline)'
unused='^(googletest|openssh-client|libfido2-1|libcbor0.8|libedit2|procps|libproc2-0|debianutils|usrmerge|libfile-find-rule-perl|libnumber-compare-perl|libtext-glob-perl|libhwloc-plugins|libxnvctrl0|libx11-6|libx11-data|libxcb1|libxau6|libxdmcp6|libxext6|libssl-dev|libcurl4-openssl-dev|libjansson4)$'

# The full set apt would install on an empty system, then less the above.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/status"
apt-get -s -o Dir::State::status="$tmp/status" -o APT::Install-Recommends=false \
  install "${packages[@]}" > "$tmp/sim" 2>&1 || { cat "$tmp/sim" >&2; die "apt-get could not resolve the build packages"; }
awk '/^Inst /{print $2}' "$tmp/sim" | grep -Ev "$base" | grep -Ev "$unused" | sort > "$tmp/wanted"
[ -s "$tmp/wanted" ] || die "no packages resolved"

rm -rf "$out"
mkdir -p "$out/debs"
echo "gpu_bundle: downloading $(wc -l < "$tmp/wanted") Debian packages into $out/debs"
# apt-get download writes into the current directory; as root it drops to the _apt user, which
# must be able to write there.
chmod 777 "$out/debs"
(cd "$out/debs" && xargs apt-get download -qq < "$tmp/wanted") ||
  die "apt-get download failed (no network to the package archive?)"
chmod 755 "$out/debs"

# The CIFAR-10 subset: whole records from the start of each file (the reader takes any multiple of
# the 3073-byte record).
mkdir -p "$tmp/cifar-10-batches-bin"
for i in 1 2 3 4 5; do
  head -c $((train_per_file * 3073)) "$cifar/data_batch_$i.bin" > "$tmp/cifar-10-batches-bin/data_batch_$i.bin"
done
head -c $((test_records * 3073)) "$cifar/test_batch.bin" > "$tmp/cifar-10-batches-bin/test_batch.bin"
[ -f "$cifar/batches.meta.txt" ] && cp "$cifar/batches.meta.txt" "$tmp/cifar-10-batches-bin/"
tar -C "$tmp" -cJf "$out/cifar10-subset.tar.xz" cifar-10-batches-bin

{
  echo "# ddp_train GPU bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "# for scripts/gpu_check.sh --bundle DIR; packages built for $(dpkg --print-architecture)"
  echo "cifar10-subset: $((5 * train_per_file)) training images ($train_per_file per file), $test_records test images"
  (cd "$out" && find . -type f ! -name MANIFEST | sort | xargs sha256sum | while read -r sum file; do
    echo "$sum $(stat -c %s "$file") ${file#./}"
  done)
} > "$out/MANIFEST"

bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
debs=$(du -sb "$out/debs" | cut -f1)
data=$(stat -c %s "$out/cifar10-subset.tar.xz")
echo "gpu_bundle: $out: $mib MiB ($(awk -v b="$debs" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of packages, $(awk -v b="$data" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of CIFAR-10)"
[ "$bytes" -le $((limit_mib * 1048576)) ] ||
  die "the bundle is $mib MiB, over the $limit_mib MiB limit: use fewer CIFAR-10 records (--train-per-file, --test)"
