#!/usr/bin/env python3
"""The runs of bench/gpu_compare.sh (see there for how to call it): ddp_train's gpu_bench and
PyTorch (bench/torch_gpu_step.py --serve) on the same GPU, interleaved, within a time budget.

Per row (model, precision) both sides start as processes of their own and warm up; then each
round measures ddp_train, PyTorch eager and (when compiled) torch.compile one after the other,
about --seconds each, while the other processes wait on their standard input, so the GPU runs
one side at a time. With --ours-variant NAME:"gpu_bench args" (repeatable) ddp_train runs as
several variants, a gpu_bench process each, measured in the same rounds (NAME1, NAME2, ...,
eager, compiled): a before/after A/B beside PyTorch in one run. Every answer is appended to RAW (out/raw.jsonl) as it comes; the table
(out/table.md, gpu_compare_table.py) is made from RAW at the end, also after a failure.

The budget, in this order:
  1. every row with ddp_train and eager (phase "eager");
  2. per-layer profiles of ddp_train (gpu_bench --profile) for --profile rows;
  3. torch.compile, rows by priority (resnet20 first, then bf16, then fp32): each compiles with
     --compile-mode within what is left (at most --compile-cap s), else with --compile-fallback,
     and then runs its rounds again with the compiled side (phase "compile"). A compilation that
     does not finish in time is stopped (its process group killed) and said so in the table.
Waits never pass the budget by more than a grace period: what did not fit is listed as not run.
"""
import argparse
import datetime
import json
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_compare_table  # noqa: E402

# (model, input side, batch): the rows. Classes: 10 at 32 px (CIFAR), 1000 at 224.
ROWS = [("resnet20", 32, 512), ("resnet56", 32, 512), ("resnet18", 32, 512),
        ("resnet50", 224, 128), ("mobilenet_v2", 224, 128)]
GRACE_S = 30.0  # how far a wait may run past the budget before everything stops
SETUP_GUESS_S = 8.0  # start + warm-up of both sides of a row, until a row has been timed
PER_RUN_S = 0.4  # a measurement beyond its timed seconds: warm-up steps, sizing, messages


class ChildError(Exception):
    pass


class OverBudget(Exception):
    pass


class Terminated(BaseException):
    """SIGTERM or SIGINT (gpu_check's timeout, a user): the children are killed, the table made.
    They run in sessions of their own, which a signal to this process's group does not reach."""


class Child:
    """A process spoken to in lines: commands on its standard input, JSON objects on its standard
    output (other lines are logged). Its own process group, so that a stop takes its helpers
    (the compiler's workers) with it. Its standard error goes to a file of its own, copied into
    the log when it ends; its last lines explain a failure."""

    def __init__(self, name, argv, env, log):
        self.name, self.log = name, log
        log.write(f"[{name}] $ {' '.join(argv)}\n")
        log.flush()
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, env=env, start_new_session=True)
        self.buf = b""

    def stderr_lines(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace").splitlines()

    def why(self):
        """The last lines of its standard error, for a report of its failure."""
        last = [line.strip() for line in self.stderr_lines() if line.strip()][-3:]
        return f" (standard error: {' | '.join(last)})" if last else ""

    def collect(self):
        """Its standard error into the log (once it has ended)."""
        if self.err.closed:
            return
        for line in self.stderr_lines():
            self.log.write(f"[{self.name} stderr] {line}\n")
        self.log.flush()
        self.err.close()

    def send(self, line):
        self.log.write(f"[{self.name}] << {line}\n")
        self.log.flush()
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise ChildError(f"{self.name} does not read its input any more ({e})") from None

    def expect(self, events, timeout):
        """The next JSON answer whose "event" is one of `events` (an "error" raises)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                raw, self.buf = self.buf.split(b"\n", 1)
                text = raw.decode(errors="replace").rstrip()
                self.log.write(f"[{self.name}] {text}\n")
                self.log.flush()
                if not text.startswith("{"):
                    continue
                try:
                    obj = json.loads(text)
                except ValueError:
                    continue
                if obj.get("event") in events:
                    return obj
                if obj.get("event") == "error":
                    raise ChildError(f"{self.name}: {obj.get('reason')}{self.why()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.name}: no {'/'.join(sorted(events))} answer within "
                                   f"{timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    try:
                        code = self.proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        code = "still running"
                    raise ChildError(f"{self.name} ended (exit code {code}) before answering "
                                     f"{'/'.join(sorted(events))}{self.why()}")
                self.buf += chunk

    def close(self, timeout=30):
        """Ends the input, waits for the exit; kills the group after `timeout`."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self.collect()
        return code

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:  # helpers of a process that ended by itself
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.collect()


class Run:
    def __init__(self, args):
        self.args = args
        self.t0 = time.monotonic()
        os.makedirs(args.out, exist_ok=True)
        self.raw_path = os.path.join(args.out, "raw.jsonl")
        self.raw_file = open(self.raw_path, "w", encoding="utf-8")
        self.log = open(os.path.join(args.out, "log.txt"), "a", buffering=1, encoding="utf-8")
        self.setup_times = []
        self.bench_env = dict(os.environ)
        for var in ("PATH", "LD_LIBRARY_PATH"):
            value = os.environ.get("DDP_BENCH_" + var)
            if value is not None:
                self.bench_env[var] = value
        self.no_gpu = None  # gpu_bench's reason when it finds no GPU
        self.too_slow = {}  # compile mode -> why it is not tried again
        self.seconds = 1.0  # timed seconds per measurement of the current row
        self.row_seconds = {}  # and of each row in phase 1 (phase 3 uses the same)
        self.terminated = False
        self.failed = set()  # rows stopped by a failure (not by the budget)

    def on_signal(self, signum, _frame):
        self.terminated = True
        raise Terminated(signal.Signals(signum).name)

    # --- time -------------------------------------------------------------------------------
    def left(self):
        return self.args.budget - (time.monotonic() - self.t0)

    def wait_s(self, want):
        """A wait of up to `want` s that ends at the budget's grace at the latest."""
        left = self.left() + GRACE_S
        if left <= 0:
            raise OverBudget("the time budget is spent")
        return min(want, left)

    def setup_s(self):
        return max(self.setup_times) if self.setup_times else SETUP_GUESS_S

    def rounds_s(self, sides):
        return self.args.rounds * sides * (self.seconds + PER_RUN_S)

    def adapt_seconds(self, rows_left):
        """--seconds auto: timed seconds per measurement that end phase 1 at about half the
        budget, given how long the rows so far took to start."""
        per_row = (0.5 * self.args.budget - (time.monotonic() - self.t0)) / max(rows_left, 1)
        return min(2.0, max(0.25, (per_row - self.setup_s()) / (self.sides(1) * self.args.rounds)
                            - PER_RUN_S))

    # --- records ----------------------------------------------------------------------------
    def record(self, obj):
        self.raw_file.write(json.dumps(obj) + "\n")
        self.raw_file.flush()

    def note(self, text, row=None):
        obj = {"kind": "note", "text": text}
        if row:
            obj.update(model=row[0], precision=row[3])
        self.record(obj)
        print(f"gpu_compare: {row[0] + ' ' + row[3] + ': ' if row else ''}{text}", flush=True)

    # --- the two sides ----------------------------------------------------------------------
    def start_ours(self, row, variant):
        """gpu_bench for `row` as `variant` (name, extra arguments)."""
        model, image, batch, precision = row
        a = self.args
        argv = [a.gpu_bench, "--model", model, "--batch", str(batch), "--image", str(image),
                "--classes", str(classes_of(image)), "--precision", precision, "--no-upload",
                "--json", "--gate", "--rounds", str(a.rounds), "--seconds", f"{self.seconds:.3g}",
                "--warmup", "10", "--rewarm", "3"]
        if precision == "fp32":
            argv.append("--tf32")
        if a.ours_find:
            argv.append("--find")
        argv += variant[1]
        return Child(variant[0], argv, self.bench_env, self.log)

    def start_peer(self, row):
        model, image, batch, precision = row
        a = self.args
        argv = [a.python, os.path.join(HERE, "torch_gpu_step.py"), "--serve", "--model", model,
                "--batch", str(batch), "--image", str(image), "--classes", str(classes_of(image)),
                "--precision", precision, "--device", a.device]
        if precision == "fp32":
            argv.append("--matmul-tf32")  # TF32 on both sides
        if a.tiny:
            argv.append("--tiny")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        peer = Child("torch", argv, env, self.log)
        try:
            loaded = peer.expect({"loaded"}, self.wait_s(240))
            self.record({"kind": "peer", **loaded})
            peer.send("warm")
            peer.expect({"ready"}, self.wait_s(240))
        except BaseException:
            peer.kill()
            raise
        return peer, loaded

    def compile(self, row, peer, modes):
        """Compiles with the first mode that finishes in time; returns (peer, mode or None)."""
        model, _, _, precision = row
        for mode in modes:
            keep = self.rounds_s(self.sides(2)) + 5 + (self.setup_s() if peer is None else 0)
            limit = min(self.args.compile_cap, self.left() - keep)
            base = {"kind": "compile", "model": model, "precision": precision, "mode": mode}
            if mode in self.too_slow:
                self.record({**base, "status": "skipped", "reason": self.too_slow[mode]})
                continue
            if limit < self.args.compile_min:
                self.record({**base, "status": "skipped",
                             "reason": f"time budget ({max(self.left(), 0):.0f} s left)"})
                continue
            if peer is None:  # the last attempt's process was stopped: a fresh one
                peer, _ = self.start_peer(row)
            peer.send(f"compile {mode}")
            t = time.monotonic()
            try:
                res = peer.expect({"compiled", "compile_failed"}, limit)
            except TimeoutError:
                peer.kill()
                self.record({**base, "status": "timeout", "seconds": time.monotonic() - t})
                self.too_slow[mode] = (f"it did not finish for {model} {precision} within "
                                       f"{limit:.0f} s; not tried again")
                print(f"gpu_compare: {model} {precision}: torch.compile({mode}) did not finish "
                      f"within {limit:.0f} s", flush=True)
                peer = None
                continue
            if res["event"] == "compiled":
                self.record({**base, "status": "ok", **{k: res[k] for k in
                             ("seconds", "graphs", "cudagraph_skips") if k in res}})
                return peer, mode
            self.record({**base, "status": "failed", "reason": res.get("reason", "")})
            peer.kill()
            peer = None
        return peer, None

    def row(self, row, phase):
        """One row's rounds; phase "eager" (ours, eager) or "compile" (ours, eager, compiled)."""
        model, _, _, precision = row
        a = self.args
        ours = {}  # variant name -> its gpu_bench
        peer = None
        try:
            t = time.monotonic()
            for v in a.variants:
                ours[v[0]] = self.start_ours(row, v)
            peer, _ = self.start_peer(row)
            for child in ours.values():
                child.expect({"ready"}, self.wait_s(240))
            self.setup_times.append(time.monotonic() - t)
            sides = list(ours) + ["eager"]
            if phase == "compile":
                peer, mode = self.compile(row, peer, self.compile_modes())
                if mode is None:
                    return False
                sides.append("compiled")
            for r in range(a.rounds):
                for side in sides:
                    want = self.seconds * 4 + 120
                    extra = {}
                    if side in ours:
                        if r > 0:
                            ours[side].expect({"ready"}, self.wait_s(60))
                        ours[side].send("go")
                        res = ours[side].expect({"run"}, self.wait_s(want))
                        if a.named_variants:
                            extra = {"variant": side}
                    else:
                        peer.send(f"run {side} {self.seconds:.3g} {r}")
                        res = peer.expect({"run"}, self.wait_s(want))
                    self.record({"kind": "run", "image": row[1], "batch": row[2], **res,
                                 "side": "ours" if side in ours else side, **extra,
                                 "phase": phase, "model": model, "precision": precision,
                                 "round": r})
                    print(f"gpu_compare: {model:12s} {precision} {phase:7s} round {r} "
                          f"{side:8s} {res['images_per_s']:12.1f} images/s", flush=True)
            return True
        except ChildError as e:
            if any(c.proc.poll() == 77 for c in ours.values()):
                self.no_gpu = "gpu_bench found no usable GPU (exit code 77); see the log"
                return False
            self.failed.add(row)
            self.note(f"stopped ({phase} phase): {e}", row)
            return False
        except TimeoutError as e:
            self.failed.add(row)
            self.note(f"stopped ({phase} phase): {e}", row)
            return False
        finally:
            for child in list(ours.values()) + [peer]:
                if child is None:
                    continue
                if self.terminated:
                    child.kill()
                elif child.close(timeout=20) is None:
                    self.log.write(f"[{child.name}] killed: it did not exit\n")

    def compile_modes(self):
        modes = [self.args.compile_mode]
        if self.args.compile_fallback not in ("none", self.args.compile_mode):
            modes.append(self.args.compile_fallback)
        return modes

    def sides(self, peers):
        """How many sides a round measures: every variant of ddp_train and `peers` others."""
        return len(self.args.variants) + peers

    def profile(self, row, variant):
        model, image, batch, precision = row
        argv = [self.args.gpu_bench, "--model", model, "--batch", str(batch), "--image",
                str(image), "--classes", str(classes_of(image)), "--precision", precision,
                "--no-upload", "--warmup", "10", "--seconds", "0.5", "--profile",
                "--profile-steps", "10"]
        if precision == "fp32":
            argv.append("--tf32")
        if self.args.ours_find:
            argv.append("--find")
        argv += variant[1]
        self.log.write(f"[profile] $ {' '.join(argv)}\n")
        try:
            p = subprocess.run(argv, env=self.bench_env, capture_output=True, text=True,
                               timeout=self.wait_s(120))
        except subprocess.TimeoutExpired:
            self.note("gpu_bench --profile did not finish in time", row)
            return
        with open(os.path.join(self.args.out, "profiles.txt"), "a", encoding="utf-8") as f:
            f.write(f"$ {' '.join(argv)}\n{p.stdout}{p.stderr}\n")
        if p.returncode != 0:
            self.note(f"gpu_bench --profile exited with {p.returncode} (profiles.txt)", row)


def classes_of(image):
    return 10 if image <= 64 else 1000


def header(args, rows):
    smi = {}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30).stdout.splitlines()
        if out:
            name, _, driver = out[0].partition(",")
            smi = {"gpu": name.strip(), "driver": driver.strip()}
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        source = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                                capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        source = ""
    return {"kind": "header", "date": datetime.datetime.now(datetime.timezone.utc)
            .strftime("%Y-%m-%d %H:%M UTC"), "host": socket.gethostname(),
            "source": source or "unknown", "budget": args.budget, "rounds": args.rounds,
            "seconds": args.seconds, "compile_mode": args.compile_mode,
            "compile_fallback": args.compile_fallback, "rows": [list(r) for r in rows],
            **({"variants": [[n, shlex.join(v)] for n, v in args.variants]}
               if args.named_variants else {}), **smi}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu-bench", default=os.path.join(HERE, "..", "build", "bench", "gpu_bench"))
    p.add_argument("--out", default="gpu_compare_out", help="table.md, raw.jsonl, log.txt, ...")
    p.add_argument("--budget", type=float, default=300.0, help="seconds for everything")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", default="auto", help="timed seconds per measurement")
    p.add_argument("--models", default=",".join(r[0] for r in ROWS))
    p.add_argument("--precisions", default="bf16,fp32")
    p.add_argument("--compile-mode", default="max-autotune")
    p.add_argument("--compile-fallback", default="reduce-overhead",
                   help="mode tried when --compile-mode fails or does not fit; none: no other")
    p.add_argument("--compile-cap", type=float, default=150.0, help="most seconds per compile")
    p.add_argument("--compile-min", type=float, default=20.0,
                   help="a compile is not started with less time than this for it")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--profile", default="resnet20:bf16,resnet50:bf16",
                   help="MODEL:PRECISION,... profiled with gpu_bench --profile; none: no profile")
    p.add_argument("--ours-find", action="store_true",
                   help="ddp_train chooses cuDNN algorithms by timing (gpu_bench --find; its "
                        "default now)")
    p.add_argument("--ours-variant", action="append", default=[], metavar='NAME:"ARGS"',
                   help="ddp_train as a variant NAME with these extra gpu_bench arguments, "
                        "separated by spaces or commas (repeatable; each measured in the same "
                        "rounds), e.g. before:--bn,cudnn,--algos,heuristic after:")
    p.add_argument("--python", default=sys.executable, help="the Python with PyTorch")
    p.add_argument("--device", default="cuda", help="PyTorch's device (cpu: the self-test)")
    p.add_argument("--tiny", action="store_true", help="PyTorch side: torch_gpu_step.py --tiny")
    p.add_argument("--from-raw", metavar="RAW", help="only make the table of RAW (stdout)")
    args = p.parse_args(argv)
    known = {r[0]: r for r in ROWS}
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in known:
            p.error(f"unknown model {m!r} (known: {', '.join(known)})")
    precisions = [x for x in args.precisions.split(",") if x]
    for x in precisions:
        if x not in ("fp32", "bf16"):
            p.error(f"unknown precision {x!r} (fp32, bf16)")
    rows = [(m, known[m][1], known[m][2], x) for x in precisions for m in models]
    args.variants, args.named_variants = [("ours", [])], bool(args.ours_variant)
    if args.ours_variant:
        args.variants = []
        for item in args.ours_variant:
            name, sep, rest = item.partition(":")
            if not sep or not re.fullmatch(r"[A-Za-z0-9_.+-]+", name) or \
                    name in ("eager", "compiled") or name in [v[0] for v in args.variants]:
                p.error(f"--ours-variant {item!r}: expected NAME:ARGS with a new NAME of "
                        f"letters, digits and _.+- (not eager or compiled)")
            try:
                # Commas separate arguments too: gpu_check.sh --compare-args splits on spaces
                # only (gpu_bench's own arguments here have no commas).
                args.variants.append((name, shlex.split(rest.replace(",", " "))))
            except ValueError as e:
                p.error(f"--ours-variant {item!r}: {e}")
    if args.seconds != "auto":
        args.seconds = float(args.seconds)
    if args.rounds < 1 or args.budget <= 0 or (args.seconds != "auto" and args.seconds <= 0):
        p.error("--rounds, --seconds and --budget must be positive")
    profiles = []
    if args.profile != "none":
        for item in args.profile.split(","):
            m, _, x = item.partition(":")
            if m not in known or x not in ("", "fp32", "bf16"):
                p.error(f"--profile {item!r}: expected MODEL:PRECISION of {', '.join(known)}")
            profiles.append((m, known[m][1], known[m][2], x or "bf16"))
    return args, rows, profiles


def priority(rows):
    """resnet20 first (the issue's target against torch.compile), then bf16, then fp32."""
    return sorted(rows, key=lambda r: (r[0] != "resnet20", r[3] != "bf16", rows.index(r)))


def main(argv=None):
    args, rows, profiles = parse(argv)
    if args.from_raw:
        sys.stdout.write(gpu_compare_table.render(gpu_compare_table.load(args.from_raw)))
        return 0
    run = Run(args)
    run.record(header(args, rows))
    print(f"gpu_compare: {len(rows)} rows, {args.rounds} rounds, {args.seconds} s per run, "
          f"budget {args.budget:.0f} s; output in {args.out}", flush=True)
    measured = 0
    compile_ok = not args.no_compile
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, run.on_signal)
    try:
        for i, row in enumerate(rows):  # 1. ddp_train and eager, every row
            run.seconds = run.adapt_seconds(len(rows) - i) if args.seconds == "auto" else \
                args.seconds
            run.row_seconds[row] = run.seconds
            need = run.setup_s() + run.rounds_s(run.sides(1))
            if run.left() < need:
                run.note(f"not measured: time budget ({max(run.left(), 0):.0f} s left, about "
                         f"{need:.0f} s needed)", row)
                continue
            measured += run.row(row, "eager")
            if run.no_gpu:
                run.note(run.no_gpu)
                break
        if not run.no_gpu:
            for row in profiles:  # 2. where ddp_train's time goes
                for variant in args.variants:
                    if run.left() > 15:
                        run.profile(row, variant)
            peers = [r for r in gpu_compare_table.load(run.raw_path) if r.get("kind") == "peer"]
            if compile_ok and not peers:
                run.note("torch.compile: not tried, PyTorch did not start for any row (log.txt)")
                compile_ok = False
            elif compile_ok and not peers[0].get("compile_available"):
                run.note(f"torch.compile: not in PyTorch {peers[0].get('torch')}; no compiled "
                         f"side")
                compile_ok = False
            for row in priority(rows) if compile_ok else []:  # 3. torch.compile, by priority
                run.seconds = run.row_seconds.get(row, run.seconds)
                if row in run.failed:
                    run.record({"kind": "compile", "model": row[0], "precision": row[3],
                                "mode": args.compile_mode, "status": "skipped",
                                "reason": "the row failed without it (notes)"})
                    continue
                if run.left() < run.setup_s() + run.rounds_s(run.sides(2)) + args.compile_min:
                    run.record({"kind": "compile", "model": row[0], "precision": row[3],
                                "mode": args.compile_mode, "status": "skipped",
                                "reason": f"time budget ({max(run.left(), 0):.0f} s left)"})
                    continue
                run.row(row, "compile")
    except OverBudget as e:
        run.note(f"stopped: {e}")
    except Terminated as e:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        run.note(f"stopped by {e}")
    run.record({"kind": "end", "elapsed_s": time.monotonic() - run.t0})
    run.raw_file.close()
    table = gpu_compare_table.render(gpu_compare_table.load(run.raw_path))
    with open(os.path.join(args.out, "table.md"), "w", encoding="utf-8") as f:
        f.write(table)
    print(table, flush=True)
    if run.terminated:
        return 143
    if run.no_gpu and measured == 0:
        return 77
    return 0 if measured > 0 and not run.failed else 1


if __name__ == "__main__":
    sys.exit(main())
