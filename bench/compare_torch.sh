#!/usr/bin/env bash
# ddp_train (ddp_bench) against PyTorch (bench/torch_compare.py) on the same nets, batch and thread
# counts, in one run. The two are alternated (model by model, thread count by thread count, round by
# round, and which one goes first flips every round) so that a change of machine load hits both;
# each figure in the combined table is the median over the rounds.
#
#   bench/compare_torch.sh [DDP_BENCH] [--threads 1,2] [--models "lenet vgg"] [--batch 256]
#                          [--rounds 3] [--seconds 3] [--warmup 3] [--log DIR]
#
# DDP_BENCH defaults to build/bench/ddp_bench. PYTHON (default /usr/bin/python3, the interpreter
# with Debian's python3-torch) runs the PyTorch side.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench=build/bench/ddp_bench
threads=1,2
models="lenet vgg"
batch=256
rounds=3
seconds=3
warmup=3
log=""
python="${PYTHON:-/usr/bin/python3}"
invocation="$0 $*"

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
if [[ $# -gt 0 && "$1" != -* ]]; then
  bench="$1"
  shift
fi
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --log) log="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare_torch.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

if [[ ! -x "$bench" ]]; then
  echo "compare_torch.sh: no executable ddp_bench at '$bench'; build it" \
       "(cmake --build build --target ddp_bench) or pass its path as the first argument" >&2
  exit 1
fi
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "compare_torch.sh: '$python' cannot import torch; set PYTHON to an interpreter with" \
       "PyTorch (Debian: /usr/bin/python3 with python3-torch)" >&2
  exit 1
fi
if [[ -z "$log" ]]; then log="$(mktemp -d /tmp/compare_torch.XXXXXX)"; fi
mkdir -p "$log"
csv="$log/results.csv"
: > "$csv"

ddp_cmd=("$bench" --batch "$batch" --warmup "$warmup" --seconds "$seconds" --csv)
torch_cmd=("$python" "$here/torch_compare.py" --batch "$batch" --warmup "$warmup"
           --seconds "$seconds" --csv)

echo "compare_torch: ddp_train (ddp_bench) vs PyTorch, alternated, median of $rounds round(s)"
echo "command : $invocation"
echo "ddp     : ${ddp_cmd[*]} --model M --threads T"
echo "torch   : ${torch_cmd[*]} --model M --threads T"
echo "logs    : $log"
echo "load    : $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) on $(nproc) CPUs at start"
load1=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load1" -v n="$(nproc)" 'BEGIN { exit !(l > 0.5 * n) }'; then
  echo "WARNING : the machine is busy (load $load1 on $(nproc) CPUs): multi-thread figures" \
       "suffer most (OpenMP threads wait for descheduled peers); rerun when it is idle"
fi

run() {  # impl model threads round
  local impl=$1 m=$2 t=$3 r=$4 out
  out="$log/$impl.$m.t$t.r$r.txt"
  if [[ $impl == ddp ]]; then
    "${ddp_cmd[@]}" --model "$m" --threads "$t" > "$out" 2>&1 || {
      echo "ddp_bench failed, see $out" >&2; tail -5 "$out" >&2; exit 1; }
  else
    "${torch_cmd[@]}" --model "$m" --threads "$t" > "$out" 2>&1 || {
      echo "torch_compare.py failed, see $out" >&2; tail -5 "$out" >&2; exit 1; }
  fi
  grep '^csv,' "$out" | sed "s/\$/,$r/" >> "$csv"
  grep '^csv,ddp\|^csv,torch' "$out" | awk -F, -v r="$r" \
    '{ printf "  round %d  %-5s %-5s threads %-2s %10.1f images/s\n", r, $2, $3, $4, $9 }'
}

IFS=',' read -r -a tlist <<< "$threads"
for ((r = 1; r <= rounds; r++)); do
  for m in $models; do
    for t in "${tlist[@]}"; do
      if ((r % 2)); then run ddp "$m" "$t" "$r"; run torch "$m" "$t" "$r"
      else run torch "$m" "$t" "$r"; run ddp "$m" "$t" "$r"; fi
    done
  done
done
echo "load    : $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the end"

"$python" - "$csv" "$batch" "$invocation" <<'EOF'
import statistics
import sys

path, batch, invocation = sys.argv[1], sys.argv[2], sys.argv[3]
rows, warn = {}, False
for line in open(path):
    f = line.strip().split(",")
    if f[1] == "warning":
        warn = True
        continue
    impl, model, threads = f[1], f[2], int(f[3])
    rows.setdefault((model, threads), {}).setdefault(impl, []).append(float(f[8]))
print(f"\ncombined: images/s, batch {batch}, median over rounds (min-max in brackets)")
print(f"  {'model':<6} {'threads':>7} {'ddp_train':>24} {'pytorch':>24} {'ddp/torch':>10}")
for (model, threads) in sorted(rows):
    d = rows[(model, threads)]
    cells = []
    for impl in ("ddp", "torch"):
        v = d.get(impl, [])
        cells.append(f"{statistics.median(v):9.1f} [{min(v):.0f}-{max(v):.0f}]" if v else "-")
    ratio = (statistics.median(d["ddp"]) / statistics.median(d["torch"])
             if d.get("ddp") and d.get("torch") else float("nan"))
    print(f"  {model:<6} {threads:>7} {cells[0]:>24} {cells[1]:>24} {ratio:10.2f}")
print(f"  command: {invocation}")
if warn:
    print("WARNING: libopenblas0 is missing or not the BLAS torch loaded; torch is handicapped")
EOF
