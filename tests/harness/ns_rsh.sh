#!/bin/sh
# ns_rsh.sh [ssh options] HOST COMMAND...
# An `ssh` stand-in for mpirun (--mca plm_rsh_agent tests/harness/ns_rsh.sh): runs COMMAND on the
# "workstation" HOST, i.e. in the network namespace $SLC_NS-HOST created by slurm_cluster.sh
# (slc_net_up), in a fresh UTS namespace whose hostname is HOST. The mount namespace is kept, so the
# binary, the data and the test's files are where they are on this machine. Like ssh, the words of
# COMMAND are joined with spaces and run by a shell.
: "${SLC_NS:?SLC_NS (the namespace prefix) must be set, as slurm_cluster.sh exports it}"
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOoQRSWw]) shift 2 ;;  # ssh options that take a value
    -*) shift ;;                         # flags (ORTE may pass -x)
    *) break ;;
  esac
done
host=$1
shift
[ -e "/run/netns/$SLC_NS-$host" ] || { echo "ns_rsh.sh: no namespace $SLC_NS-$host for host '$host'" >&2; exit 255; }
exec nsenter --net="/run/netns/$SLC_NS-$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
