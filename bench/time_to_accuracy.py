#!/usr/bin/env python3
"""Time to accuracy: the wall time from a process's start to its final test accuracy, for ddp_train
and for airbench94 (KellerJordan/cifar10-airbench), and the statistics over seeds.
bench/time_to_accuracy.sh drives it; the parsing and the statistics are tested on recorded output
by tests/integration/test_time_to_accuracy_logic.sh.

  time_to_accuracy.py ours --seed S --out FILE -- COMMAND...
      runs COMMAND (ddp_train with its arguments), times it from the moment it is started to its
      line "final test accuracy: X%", and appends one JSON line {tool, seed, wall_s, accuracy} to
      FILE. A run that exits without that line, or non-zero, is an error naming its log.
  time_to_accuracy.py airbench --tool NAME --seed S --out FILE --workdir DIR --cifar DIR -- PYTHON SCRIPT
      makes DIR/cifar10/{train,test}.pt from the CIFAR-10 binaries in --cifar (the tensors airbench's
      CifarLoader loads, once, before any timing), then starts `PYTHON SCRIPT` in DIR (unmodified:
      it trains run after run) and takes the time from its start to its first table row of a real
      run's final evaluation (epoch 'eval'; a 'warmup' run's is passed over, so the compiled
      variant's compilation and warm-up run count), with that row's tta_val_acc, then stops it. The
      row's own total_time_seconds (airbench's GPU-timed training) is kept as airbench_s.
  time_to_accuracy.py table FILE...
      the results: per tool the runs, the mean and sample standard deviation of the wall time and of
      the accuracy, min and max, and the wall-time ratio of every tool to the first (ours) - as
      Markdown for BENCHMARKS.md.
"""
import json
import math
import os
import signal
import subprocess
import sys
import time

FINAL = "final test accuracy:"


def append(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def run_ours(seed, out, command):
    log_path = out + f".ours.{seed}.log"
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        accuracy, wall = None, None
        for line in p.stdout:
            log.write(line)
            if line.startswith(FINAL) and accuracy is None:
                wall = time.monotonic() - t0
                accuracy = parse_final(line)
        rc = p.wait()
    if rc != 0 or accuracy is None:
        sys.exit(f"time_to_accuracy: ddp_train (seed {seed}) exited {rc} "
                 f"{'without a final accuracy' if accuracy is None else ''}; see {log_path}")
    append(out, {"tool": "ddp_train", "seed": seed, "wall_s": wall, "accuracy": accuracy})


def parse_final(line):
    """'final test accuracy: 94.12% (10000 samples), ...' -> 0.9412."""
    text = line[len(FINAL):].strip()
    return float(text.split("%", 1)[0]) / 100.0


class AirbenchTable:
    """airbench's printed table: a header row naming the columns, then one row per epoch of each
    run ('|  0  |  1  |  2.3  | ...'), the run column set on a run's first row only."""

    def __init__(self):
        self.columns = None
        self.run = None

    def feed(self, line):
        """Returns (tta_val_acc, total_time_seconds) at a real run's 'eval' row, else None."""
        line = line.strip()
        if not line.startswith("|") or not line.endswith("|"):
            return None
        cells = [c.strip() for c in line[1:-1].split("|")]
        if self.columns is None:
            if "epoch" in cells and "tta_val_acc" in cells:
                self.columns = cells
            return None
        if len(cells) != len(self.columns):
            return None
        row = dict(zip(self.columns, cells))
        if row.get("run"):
            self.run = row["run"]
        if row.get("epoch") != "eval" or self.run == "warmup":
            return None
        return float(row["tta_val_acc"]), float(row.get("total_time_seconds") or "nan")


def make_airbench_data(workdir, cifar):
    """DIR/cifar10/{train,test}.pt as airbench's CifarLoader saves them after its torchvision
    download: uint8 images [N, 32, 32, 3], int64 labels, the class names."""
    import numpy as np
    import torch

    target = os.path.join(workdir, "cifar10")
    os.makedirs(target, exist_ok=True)
    classes = [l.strip() for l in open(os.path.join(cifar, "batches.meta.txt")) if l.strip()]
    for name, files in (("train", [f"data_batch_{i}.bin" for i in range(1, 6)]),
                        ("test", ["test_batch.bin"])):
        path = os.path.join(target, name + ".pt")
        if os.path.exists(path):
            continue
        raw = np.concatenate([np.fromfile(os.path.join(cifar, f), dtype=np.uint8) for f in files])
        raw = raw.reshape(-1, 3073)
        images = raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        torch.save({"images": torch.tensor(np.ascontiguousarray(images)),
                    "labels": torch.tensor(raw[:, 0].astype(np.int64)), "classes": classes}, path)


def run_airbench(tool, seed, out, workdir, cifar, command):
    make_airbench_data(workdir, cifar)
    log_path = out + f".{tool}.{seed}.log"
    table = AirbenchTable()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        p = subprocess.Popen(command, cwd=workdir, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        found = None
        for line in p.stdout:
            log.write(line)
            found = table.feed(line)
            if found:
                wall = time.monotonic() - t0
                break
        # The script goes on with its next runs: stop it (its whole process group).
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    if not found:
        sys.exit(f"time_to_accuracy: {tool} (seed {seed}) ended without a final evaluation row; "
                 f"see {log_path}")
    append(out, {"tool": tool, "seed": seed, "wall_s": wall, "accuracy": found[0],
                 "airbench_s": found[1]})


def stats(values):
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, sd, min(values), max(values)


def table(paths):
    records = [json.loads(l) for p in paths for l in open(p) if l.strip()]
    tools = []
    for r in records:
        if r["tool"] not in tools:
            tools.append(r["tool"])
    lines = ["| tool | runs | wall time (s): mean ± sd [min, max] | test accuracy (%): mean ± sd "
             "[min, max] | wall time vs ddp_train |", "|---|---|---|---|---|"]
    first = None
    for tool in tools:
        rows = [r for r in records if r["tool"] == tool]
        w = stats([r["wall_s"] for r in rows])
        a = stats([100.0 * r["accuracy"] for r in rows])
        first = first or w[0]
        lines.append(f"| {tool} | {len(rows)} | {w[0]:.2f} ± {w[1]:.2f} [{w[2]:.2f}, {w[3]:.2f}] | "
                     f"{a[0]:.2f} ± {a[1]:.2f} [{a[2]:.2f}, {a[3]:.2f}] | {w[0] / first:.2f}x |")
    return "\n".join(lines)


def main(argv):
    if not argv:
        sys.exit(__doc__)
    mode, rest = argv[0], argv[1:]
    opts, command = {}, []
    if "--" in rest:
        i = rest.index("--")
        rest, command = rest[:i], rest[i + 1:]
    if mode == "table":
        print(table(rest))
        return
    for i in range(0, len(rest), 2):
        opts[rest[i].lstrip("-")] = rest[i + 1]
    if not command:
        sys.exit("time_to_accuracy: no command after --")
    if mode == "ours":
        run_ours(int(opts["seed"]), opts["out"], command)
    elif mode == "airbench":
        run_airbench(opts["tool"], int(opts["seed"]), opts["out"], opts["workdir"], opts["cifar"],
                     command)
    else:
        sys.exit(f"time_to_accuracy: unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
