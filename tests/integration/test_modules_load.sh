#!/usr/bin/env bash
# The module files work after `cmake --install`: install this build into a temporary prefix, then,
# under Lmod and under Environment Modules (each in a clean `bash -c`), `module use P/modulefiles;
# module load ddp_train` must put the installed ddp_train first on PATH (ahead of another ddp_train
# already there), set DDP_TRAIN_HOME/DDP_TRAIN_CONFIGS/DDP_TRAIN_SLURM to existing directories,
# `ddp_train --version` must run, `module help`/`whatis` must work, and `module unload` must undo it.
# The installed example configs name no development path (../shared/...): their CIFAR data.root is
# the placeholder /path/to/cifar-10-batches-bin, and training with one as installed fails with a
# message that says it is the placeholder and how to set the data root.
#
# Debian's lmod and environment-modules packages conflict, so one machine has at most one installed.
# Environment Modules is also found unpacked (dpkg -x) under $DDP_ENVMODULES_ROOT (default
# /opt/environment-modules): its modulecmd.tcl runs from anywhere with tclsh.
# A module system that is missing is skipped (named in the output); with neither, the test skips.
source "$(dirname "$0")/lib.sh"
build=$(dirname "$BIN")
[ -f "$build/cmake_install.cmake" ] || skip "$build is not a CMake build directory (no cmake_install.cmake)"
command -v cmake > /dev/null || skip "cmake not found"

prefix="$WORK/prefix"
version=$(sed -nE 's/^project\(ddp_train VERSION ([0-9.]+).*/\1/p' "$SRC/CMakeLists.txt")
[ -n "$version" ] || fail "no project version in $SRC/CMakeLists.txt"
cmake --install "$build" --prefix "$prefix" > "$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; fail "cmake --install failed"; }
[ -x "$prefix/bin/ddp_train" ] || fail "cmake --install did not install bin/ddp_train"
# A build with the CUDA plugin installs it where the installed binary finds it (PREFIX/lib*).
if [ -f "$build/libddp_cuda.so" ]; then
  installed_plugin=$(find "$prefix" -name libddp_cuda.so | head -1)
  [ -n "$installed_plugin" ] || fail "cmake --install did not install libddp_cuda.so"
  "$prefix/bin/ddp_train" --version > "$WORK/installed_version" 2>&1 || fail "installed ddp_train --version failed"
  grep -qF "plugin $(realpath "$installed_plugin")" "$WORK/installed_version" ||
    { cat "$WORK/installed_version"; fail "the installed ddp_train does not load the installed plugin"; }
fi
if [ ! -d "$prefix/modulefiles/ddp_train" ]; then
  # The top-level CMakeLists.txt does not include modules/install.cmake (yet): run those same rules
  # through a minimal project into the same prefix.
  echo "NOTE: $build installs no module files; applying modules/install.cmake directly"
  mkdir -p "$WORK/modproj"
  cat > "$WORK/modproj/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.20)
project(ddp_train VERSION $version LANGUAGES NONE)
set(CMAKE_INSTALL_LIBDIR lib)
include(GNUInstallDirs)
set(PROJECT_SOURCE_DIR "$SRC")
include("$SRC/modules/install.cmake")
EOF
  { cmake -S "$WORK/modproj" -B "$WORK/modproj/build" && cmake --install "$WORK/modproj/build" --prefix "$prefix"; } \
    > "$WORK/modinstall.log" 2>&1 || { cat "$WORK/modinstall.log"; fail "modules/install.cmake failed"; }
fi
for f in "modulefiles/ddp_train/$version.lua" "modulefiles/ddp_train/$version" \
         share/ddp_train/configs/fashion_mnist.toml share/ddp_train/slurm/train_2nodes.sh; do
  [ -f "$prefix/$f" ] || fail "not installed: $f"
done
! grep -l '@DDP_' "$prefix/modulefiles/ddp_train/"* || fail "placeholders left in the installed module files"
# The installed templates are assembled from slurm/parts/ at install time: the same text as the
# checkout's (test_slurm_templates.sh checks those against the parts), and executable.
for t in train_1node.sh train_2nodes.sh train_cpu.sh; do
  cmp "$prefix/share/ddp_train/slurm/$t" "$SRC/slurm/$t" || fail "installed $t differs from slurm/$t"
  [ -x "$prefix/share/ddp_train/slurm/$t" ] || fail "installed $t is not executable"
done

cfgs="$prefix/share/ddp_train/configs"
! grep -n 'shared/' "$cfgs"/*.toml || fail "an installed config names the repository's development data (../shared/...)"
for c in cifar.toml cifar_vgg.toml cifar_vgg_bn.toml; do
  grep -qx 'root = "/path/to/cifar-10-batches-bin"' "$cfgs/$c" || fail "installed $c: data.root is not the placeholder"
done
grep -q '^root = "../shared/data/cifar-10-batches-bin"' "$SRC/configs/cifar.toml" ||
  fail "the repository's configs/cifar.toml changed its data.root (the tests read it)"
rc=0
(cd "$WORK" && "$prefix/bin/ddp_train" --config "$cfgs/cifar.toml" --train.epochs 1 --run-dir "$WORK/placeholder_run" \
  --runtime.threads 1) > "$WORK/placeholder.log" 2>&1 || rc=$?
cat "$WORK/placeholder.log"
[ "$rc" != 0 ] || fail "training with the installed cifar.toml as it is succeeded"
grep -qF "'/path/to/cifar-10-batches-bin' is the placeholder of an installed example config" "$WORK/placeholder.log" &&
  grep -qF -- "--data.root DIR" "$WORK/placeholder.log" ||
  fail "the error for the installed config's data.root does not explain the placeholder and --data.root"

# A decoy ddp_train earlier on PATH: the module must put the installed one in front of it.
mkdir -p "$WORK/decoy"
printf '#!/bin/sh\necho decoy\n' > "$WORK/decoy/ddp_train"
chmod +x "$WORK/decoy/ddp_train"

# check_module_system NAME INIT_COMMANDS MODULEFILE: load/unload in a clean shell, where `module show`
# must name MODULEFILE (Lmod: the .lua, Environment Modules: the Tcl file); prints what it found.
check_module_system() {
  local name=$1 init=$2 file=$3 out
  out=$(env -i HOME="$WORK" PATH="$WORK/decoy:/usr/local/bin:/usr/bin:/bin" TERM=dumb \
    bash --noprofile --norc -c "
      set -e
      $init
      module use '$prefix/modulefiles'
      module load ddp_train
      module show ddp_train 2>&1 | grep -qF -- '$file:' && echo file=ok
      test \"\$(module avail ddp_train 2>&1 | grep -c 'ddp_train/')\" = 1 && echo avail=ok
      echo \"which=\$(command -v ddp_train)\"
      echo \"version=\$(ddp_train --version | head -1)\"
      echo \"home=\$DDP_TRAIN_HOME\"
      test -f \"\$DDP_TRAIN_CONFIGS/fashion_mnist.toml\" && echo configs=ok
      test -f \"\$DDP_TRAIN_SLURM/train_2nodes.sh\" && echo slurm=ok
      module help ddp_train 2>&1 | grep -q 'srun --mpi=pmix' && echo help=ok
      module whatis ddp_train 2>&1 | grep -q 'data-parallel' && echo whatis=ok
      module unload ddp_train
      echo \"after_unload=\$(command -v ddp_train)\"
    " 2>&1) || { echo "$out"; fail "$name: module use/load failed"; }
  echo "$out" | sed "s/^/  $name: /"
  grep -qx "which=$prefix/bin/ddp_train" <<< "$out" || fail "$name: ddp_train on PATH is not the installed one"
  grep -q "^version=ddp_train $version\b" <<< "$out" || fail "$name: ddp_train --version did not run"
  grep -qx "home=$prefix" <<< "$out" || fail "$name: DDP_TRAIN_HOME is not the prefix"
  for k in file avail configs slurm help whatis; do grep -qx "$k=ok" <<< "$out" || fail "$name: $k check failed"; done
  grep -qx "after_unload=$WORK/decoy/ddp_train" <<< "$out" || fail "$name: module unload did not restore PATH"
}

tested=() skipped=()
if [ -f /usr/share/lmod/lmod/init/bash ]; then
  check_module_system Lmod "source /usr/share/lmod/lmod/init/bash" "$prefix/modulefiles/ddp_train/$version.lua"
  tested+=("Lmod $(/usr/share/lmod/lmod/libexec/lmod --version 2>&1 | grep -o 'Version [0-9.]*' | head -1)")
else
  skipped+=("Lmod (apt-get install lmod)")
fi
em_root=${DDP_ENVMODULES_ROOT:-/opt/environment-modules}
em_cmd=""
if [ -f /usr/share/modules/init/bash ]; then
  em_init="source /usr/share/modules/init/bash"
  em_cmd=/usr/share/modules/init/bash
else
  em_cmd=$(find "$em_root" -name modulecmd.tcl -type f 2> /dev/null | head -1 || true)
  tclsh=$(command -v tclsh8.6 || command -v tclsh || true)
  [ -n "$em_cmd" ] && [ -n "$tclsh" ] && em_init="eval \"\$($tclsh $em_cmd bash autoinit)\""
fi
if [ -n "${em_init:-}" ]; then
  check_module_system "Environment Modules" "$em_init" "$prefix/modulefiles/ddp_train/$version"
  tested+=("Environment Modules ($em_cmd)")
else
  skipped+=("Environment Modules (apt-get install environment-modules, or unpack it: apt-get download environment-modules && dpkg -x environment-modules_*.deb $em_root)")
fi
for s in "${skipped[@]}"; do echo "SKIPPED PART: $s not found"; done
[ ${#tested[@]} -gt 0 ] || skip "neither Lmod nor Environment Modules is installed"
pass "module load ddp_train puts $prefix/bin/ddp_train first on PATH under: ${tested[*]}"
