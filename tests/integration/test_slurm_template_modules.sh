#!/usr/bin/env bash
# The batch templates' module loading, with the real Lmod and Environment Modules and no cluster
# (seconds; the real-cluster run is test_slurm_2nodes.sh). Each case runs slurm/train_cpu.sh the way
# slurmstepd runs a batch script on a site where `module` is defined for login shells only: a
# non-login bash with a bare environment (no `module` function, no BASH_ENV), MODULEPATH naming a
# test module `ddptest` that puts a stand-in `ddp_train` on PATH. srun is a stand-in that runs its
# command here.
#  - Lmod, found by the template's default search (/etc/profile.d/lmod.sh, ...): the module loads,
#    the log says which init script defined `module` and what is loaded, and ddp_train comes from it;
#  - Environment Modules through DDP_MODULE_INIT (a site init script): the same;
#  - DDP_MODULES naming a module that does not exist: exit 2, the module named, nothing launched;
#  - DDP_MODULES set but no module system: exit 2 with the scripts tried, nothing launched;
#  - DDP_MODULES unset (default ddp_train) and no module system: says so, runs ddp_train from PATH.
source "$(dirname "$0")/lib.sh" || exit 2  # it sets WORK, where the stand-ins are written

mkdir -p "$WORK/bin" "$WORK/modbin" "$WORK/modulefiles/ddptest"
cat > "$WORK/bin/srun" <<'EOF'
#!/bin/bash
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
exec "$@"
EOF
# The "ddp_train" the module provides: records its arguments and the module's variable.
cat > "$WORK/modbin/ddp_train" <<'EOF'
#!/bin/sh
echo "ddp_train $* DDP_TEST_MODULE=${DDP_TEST_MODULE:-unset}" > "$FAKE_DIR/trainer.args"
EOF
chmod +x "$WORK/bin/srun" "$WORK/modbin/ddp_train"
# A Tcl module file: Lmod and Environment Modules both read it.
cat > "$WORK/modulefiles/ddptest/1.0" <<EOF
#%Module1.0
prepend-path PATH $WORK/modbin
setenv DDP_TEST_MODULE loaded
EOF
: > "$WORK/no_module_system.sh"  # an init script that defines no `module`

# run_template NAME [ENV...]: the template in a bare non-login bash, as a batch script; prints its
# exit code. The log is $WORK/NAME/log.
run_template() {
  local name=$1 rc=0; shift
  export FAKE_DIR="$WORK/$name"
  mkdir -p "$FAKE_DIR"
  (cd "$FAKE_DIR" && exec env -i HOME="$WORK" PATH="$WORK/bin:/usr/local/bin:/usr/bin:/bin" \
     FAKE_DIR="$FAKE_DIR" MODULEPATH="$WORK/modulefiles" SLURM_JOB_ID=42 SLURM_JOB_NAME=fake \
     SLURM_NTASKS=1 SLURM_JOB_NODELIST=n1 SLURM_CPUS_PER_TASK=1 DDP_SHOW_HOSTS=0 DDP_CONFIG=c.toml \
     "$@" bash --noprofile --norc "$SRC/slurm/train_cpu.sh") > "$FAKE_DIR/log" 2>&1 || rc=$?
  echo "$rc"
}
show() { sed "s/^/  $1: /" "$WORK/$1/log"; }

# Precondition: the bare batch shell has no `module` of its own (else nothing here is tested).
! env -i PATH=/usr/bin:/bin bash --noprofile --norc -c 'type module' > /dev/null 2>&1 ||
  fail "a bare non-login bash defines 'module' here (BASH_ENV?): cannot simulate a batch shell without it"

tested=() skipped=()
lmod_init=""
for f in /etc/profile.d/lmod.sh /etc/profile.d/z00_lmod.sh /usr/share/lmod/lmod/init/bash; do
  [ -f "$f" ] && { lmod_init=$f; break; }
done
if [ -n "$lmod_init" ]; then
  rc=$(run_template lmod DDP_MODULES=ddptest)
  show lmod
  [ "$rc" = 0 ] || fail "Lmod: the template exited $rc"
  grep -qF 'modules: `module` was not defined in this batch shell: initialised it from /' "$WORK/lmod/log" ||
    fail "Lmod: the log does not say which init script defined 'module'"
  grep -q 'modules loaded: ddptest/1.0' "$WORK/lmod/log" || fail "Lmod: the log does not say that ddptest/1.0 is loaded"
  grep -q "start .*$WORK/modbin/ddp_train" "$WORK/lmod/log" || fail "Lmod: the log does not name the ddp_train of the module"
  grep -q 'DDP_TEST_MODULE=loaded' "$WORK/lmod/trainer.args" 2> /dev/null ||
    fail "Lmod: ddp_train did not run with the module's environment"
  tested+=("Lmod (default search)")

  rc=$(run_template missing DDP_MODULES="ddptest nosuchmodule")
  show missing
  [ "$rc" = 2 ] || fail "a module that does not exist: exit $rc, expected 2"
  grep -q "error: 'module load nosuchmodule' failed" "$WORK/missing/log" || fail "the failing module is not named"
  [ ! -f "$WORK/missing/trainer.args" ] || fail "ddp_train was launched although a module failed to load"
else
  skipped+=("Lmod (apt-get install lmod)")
fi

em_cmd=""
if [ -f /usr/share/modules/init/bash ]; then
  echo ". /usr/share/modules/init/bash" > "$WORK/site_modules.sh"
  em_cmd=/usr/share/modules/init/bash
else
  em_cmd=$(find "${DDP_ENVMODULES_ROOT:-/opt/environment-modules}" -name modulecmd.tcl -type f 2> /dev/null | head -1 || true)
  tclsh=$(command -v tclsh8.6 || command -v tclsh || true)
  [ -n "$em_cmd" ] && [ -n "$tclsh" ] && echo "eval \"\$($tclsh $em_cmd bash autoinit)\"" > "$WORK/site_modules.sh"
fi
if [ -f "$WORK/site_modules.sh" ]; then
  rc=$(run_template envmod DDP_MODULES=ddptest DDP_MODULE_INIT="$WORK/site_modules.sh")
  show envmod
  [ "$rc" = 0 ] || fail "Environment Modules: the template exited $rc"
  grep -qF "initialised it from $WORK/site_modules.sh" "$WORK/envmod/log" || fail "Environment Modules: init script not named"
  grep -q 'modules loaded: ddptest/1.0' "$WORK/envmod/log" || fail "Environment Modules: ddptest/1.0 not reported loaded"
  grep -q 'DDP_TEST_MODULE=loaded' "$WORK/envmod/trainer.args" 2> /dev/null ||
    fail "Environment Modules: ddp_train did not run with the module's environment"
  tested+=("Environment Modules ($em_cmd, through DDP_MODULE_INIT)")
else
  skipped+=("Environment Modules (apt-get install environment-modules, or scripts/setup.sh)")
fi
[ ${#tested[@]} -gt 0 ] || skip "neither Lmod nor Environment Modules is installed"

rc=$(run_template nosystem DDP_MODULES=ddptest DDP_MODULE_INIT="$WORK/no_module_system.sh")
show nosystem
[ "$rc" = 2 ] || fail "DDP_MODULES set without a module system: exit $rc, expected 2"
grep -q "error: DDP_MODULES=\"ddptest\" but no module system found.*$WORK/no_module_system.sh" "$WORK/nosystem/log" ||
  fail "no module system: the error does not say so with the scripts tried"
[ ! -f "$WORK/nosystem/trainer.args" ] || fail "ddp_train was launched although DDP_MODULES could not be loaded"

rc=$(run_template default PATH="$WORK/modbin:$WORK/bin:/usr/bin:/bin" DDP_MODULE_INIT="$WORK/no_module_system.sh")
show default
[ "$rc" = 0 ] || fail "DDP_MODULES unset without a module system: exit $rc, expected 0 (ddp_train from PATH)"
grep -q "modules: no module system found .*ddp_train comes from PATH" "$WORK/default/log" ||
  fail "DDP_MODULES unset without a module system: the log does not say so"
[ -f "$WORK/default/trainer.args" ] || fail "DDP_MODULES unset: ddp_train from PATH was not launched"

for s in "${skipped[@]}"; do echo "SKIPPED PART: $s not found"; done
pass "\`module\` undefined in the batch shell: initialised and loaded under ${tested[*]}; failures exit 2 before the launch"
